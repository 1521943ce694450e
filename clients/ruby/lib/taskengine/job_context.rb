# frozen_string_literal: true

module Taskengine
  # A handler's window on its leased execution, valid while the handler runs.
  # Thread-safe.
  #
  # A handler returns its result (any JSON value) or raises:
  #   RetryableError / any other StandardError -> fail, class retryable (retried with backoff)
  #   PermanentError                           -> fail, class permanent (quarantined)
  #   EffectAmbiguous                          -> fail, class ambiguous (quarantined)
  #   Canceled                                 -> released while cancel is requested: ends canceled
  #   LeaseLost                                -> nothing is published (another claim owns it)
  class JobContext
    attr_reader :lease

    def initialize(client, lease)
      @client = client
      @lease = lease
      @mutex = Mutex.new
      @progress = nil
      @sent_progress = nil
      @cancel_requested = false
      @lost = false
    end

    def id = lease.id
    def claim_version = lease.claim_version
    def job = lease.job
    def tenant = lease.tenant
    def attempt = lease.attempt
    def payload = lease.payload
    def cancel_requested? = @cancel_requested
    def lost? = @lost

    # "<execution id>:<name>": stable across retries and replays.
    def effect_key(name)
      lease.effect_key_prefix + name
    end

    # Records progress (clamped to 0..100); sent with the next heartbeat.
    def progress(percent)
      @mutex.synchronize { @progress = percent.to_i.clamp(0, 100) }
    end

    # Appends a log line (level debug, info, warn, error). Raises LeaseLost
    # when the claim is no longer current.
    def log(message, level: "info")
      call("log", "level" => level, "message" => message)
      nil
    end

    # Extends the lease now (the worker also does on its own), then #checkpoint.
    def heartbeat
      body = {}
      progress = take_progress
      body["progress"] = progress if progress
      doc = call("heartbeat", body)
      apply("ok" => true, "cancel_requested" => doc && doc["cancel_requested"])
      checkpoint
    end

    # A cheap cancellation point (no network): raises Canceled or LeaseLost
    # when the last heartbeat learned that the handler must stop.
    def checkpoint
      raise LeaseLost, "execution #{id}: claim #{claim_version} is no longer current" if @lost
      raise Canceled, "execution #{id}: cancellation was requested" if @cancel_requested
    end

    # Performs the block (given the effect key) at most once per effect key
    # and returns its detail.
    #   proceed       the block runs; what it returns (a String, or JSON of
    #                 another value) is committed as the detail and returned
    #   already_done  the block does not run; the recorded detail is returned
    #   ambiguous     an earlier claim reserved it and never confirmed: with
    #                 idempotent: true (the sink deduplicates by the key) the
    #                 block runs again with the same key; otherwise
    #                 EffectAmbiguous is raised (the execution is quarantined)
    #   canceled      Canceled is raised: start no new effect
    #   stale         LeaseLost is raised
    # The block raising NotPerformed gives the reservation back (a retry
    # proceeds); any other error leaves the outcome unknown.
    def effect(name, idempotent: false)
      answer = call("effects/#{ERB::Util.url_encode(name)}/reserve", {})
      kind = answer["answer"]
      key = answer["key"] || effect_key(name)
      case kind
      when "already_done" then return answer["detail"].to_s
      when "canceled"
        @cancel_requested = true
        raise Canceled, "execution #{id}: cancellation was requested before effect #{key}"
      when "ambiguous" then raise EffectAmbiguous, key unless idempotent
      when "proceed" then nil
      else raise RetryableError, "effect #{key}: unexpected answer #{kind.inspect}"
      end
      begin
        detail = yield key
      rescue NotPerformed
        call("effects/#{ERB::Util.url_encode(name)}/release", {}) if kind == "proceed"
        raise
      end
      detail = detail.nil? ? "" : (detail.is_a?(String) ? detail : JSON.generate(detail))
      call("effects/#{ERB::Util.url_encode(name)}/commit", "detail" => detail)
      detail
    end

    # ---- used by Worker

    # Applies a heartbeat answer for this lease.
    def apply(answer)
      unless answer["ok"]
        @lost = true if %w[stale not_found].include?(answer.dig("error", "code"))
        return
      end
      @cancel_requested = true if answer["cancel_requested"]
    end

    # The progress to send, if it changed since the last call.
    def take_progress
      @mutex.synchronize do
        next nil if @progress.nil? || @progress == @sent_progress

        @sent_progress = @progress
      end
    end

    def mark_lost
      @lost = true
    end

    private

    def call(action, body)
      raise LeaseLost, "execution #{id}: claim #{claim_version} is no longer current" if @lost

      @client.worker_call(id, action, { "claim_version" => claim_version }.merge(body))
    rescue Stale, NotFound => e
      @lost = true
      raise LeaseLost, "execution #{id}: #{e.message}"
    end
  end
end
