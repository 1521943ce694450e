# frozen_string_literal: true

require "logger"
require "socket"

module Taskengine
  # Runs registered handlers for leased executions.
  #
  #   worker = Taskengine::Worker.new(queues: ["mail"])
  #   worker.job("send-welcome") do |ctx, payload|
  #     msg_id = ctx.effect("send-sms") { |key| sms.send(payload["to"], dedup: key) }
  #     { "message" => msg_id }
  #   end
  #   worker.run   # until SIGTERM/SIGINT or #stop
  #
  # What #run does, as the C++ SDK's Worker (clients/cpp/README.md):
  # - leases with a long poll for as many executions as it has free handler
  #   threads (never more than concurrency), with confirm_start: it confirms
  #   the start of each lease in one batch heartbeat and runs only those the
  #   server confirmed, so leases it never received cost no attempt (L4);
  # - heartbeats every held lease in one batch every min(lease)/3 from a thread
  #   of its own, which learns cancel requests and lost claims;
  # - reports each outcome: complete with the handler's result, fail with a
  #   class, or release; a finish is retried while the server is away
  #   (finish_retry_for) and dropped when the claim turns out stale;
  # - rides out a server that is down (backoff with jitter); a refused token
  #   (401/403 on lease) makes run raise that ApiError;
  # - #stop (SIGTERM/SIGINT): no more leasing, the open long poll is aborted,
  #   leases not yet started are released, running handlers finish and are
  #   reported, then run returns.
  # A job this worker has no handler for fails retryable, naming the job.
  # Thread-safe: #stop and #stats may be used from any thread.
  class Worker
    Stats = Struct.new(:leased, :completed, :failed, :released, :lost, :reconnects, keyword_init: true)

    attr_reader :client, :worker_id

    # client: default Client.new (TASKENGINE_SERVER, TASKENGINE_TOKEN).
    # queues: in priority order. concurrency: handler threads, the most leases
    # held (default 4). poll_wait: the lease long poll, seconds (at most 30).
    # max_jobs: run returns after this many leases (0 = never).
    # finish_retry_for: seconds a finish is retried while the server is away.
    def initialize(client: nil, queues: ["default"], concurrency: 4, worker_id: nil, name: "",
                   poll_wait: 30.0, max_jobs: 0, idle_heartbeat: 10.0, reconnect_min: 0.1,
                   reconnect_max: 5.0, finish_retry_for: 300.0, logger: Logger.new($stderr))
      @client = client || Client.new
      @queues = queues.empty? ? ["default"] : queues.dup
      @concurrency = concurrency.to_i.clamp(1, 100)
      @worker_id = worker_id || "#{Socket.gethostname}:#{Process.pid}"
      @name = name
      @poll_wait = poll_wait.to_f.clamp(0.0, 30.0)
      @max_jobs = max_jobs
      @idle_heartbeat = idle_heartbeat
      @reconnect_min = [reconnect_min, 0.01].max
      @reconnect_max = [reconnect_max, @reconnect_min].max
      @finish_retry_for = finish_retry_for
      @logger = logger
      @handlers = {}
      @stopping = false
      @abort = nil
      @mutex = Mutex.new
      @changed = ConditionVariable.new
      # Protected by @mutex:
      @queue = []     # leased, not started
      @held = {}      # [id, claim version] => JobContext: leased, not yet reported
      @leasing_done = false
      @heartbeat_done = false
      @new_lease = false
      @stats = Stats.new(leased: 0, completed: 0, failed: 0, released: 0, lost: 0, reconnects: 0)
    end

    # Registers the block |ctx, payload| as the handler of job name.
    def job(name, &block)
      register(name, block)
    end

    # Registers the handler of job name: an object responding to
    # call(ctx, payload), or a class whose instances respond to perform(ctx, payload).
    def register(name, handler)
      raise ArgumentError, "job #{name} already has a handler" if @handlers.key?(name)

      @handlers[name] = handler.is_a?(Class) ? ->(ctx, payload) { handler.new.perform(ctx, payload) } : handler
      self
    end

    def stats
      @mutex.synchronize { @stats.dup }
    end

    # Graceful stop (see the class comment). Idempotent; safe in a trap.
    def stop
      @stopping = true
      Thread.new do
        @abort&.abort
        @mutex.synchronize { @changed.broadcast }
      end
    end

    # Leases and runs until #stop or max_jobs; returns the Stats. Raises the
    # ApiError that made it give up (401/403 on lease).
    def run(handle_signals: true)
      raise ArgumentError, "no handlers registered (use worker.job(name) { ... })" if @handlers.empty?

      previous = handle_signals ? %w[TERM INT].to_h { |sig| [sig, trap(sig) { stop }] } : {}
      threads = Array.new(@concurrency) { Thread.new { handler_loop } }
      heartbeats = Thread.new { heartbeat_loop }
      begin
        lease_loop
      ensure
        @mutex.synchronize do
          @leasing_done = true
          @changed.broadcast
        end
        threads.each(&:join)
        @mutex.synchronize do
          @heartbeat_done = true
          @changed.broadcast
        end
        heartbeats.join
        previous.each { |sig, handler| trap(sig, handler) }
      end
      stats
    end

    private

    def lease_loop
      backoff = @reconnect_min
      last_error = nil
      until @stopping
        free = @mutex.synchronize do
          @changed.wait(@mutex, 1.0) until @stopping || @held.size < @concurrency
          next 0 if @stopping || (@max_jobs.positive? && @stats.leased >= @max_jobs)

          n = @concurrency - @held.size
          @max_jobs.positive? ? [n, @max_jobs - @stats.leased].min : n
        end
        return if free.zero?

        @abort = Transport::Abort.new
        return if @stopping

        begin
          leases = @client.lease(@worker_id, @queues, max: [free, 100].min, wait_ms: (@poll_wait * 1000).to_i,
                                                      abort: @abort, name: @name, host: Socket.gethostname,
                                                      pid: Process.pid, version: "taskengine-ruby/#{VERSION}",
                                                      concurrency: @concurrency, confirm_start: true)
        rescue Error => e
          return if @stopping

          if [401, 403].include?(e.http_status)
            @logger.error("taskengine worker #{@worker_id}: lease refused: #{e.message}")
            raise
          end
          @mutex.synchronize { @stats.reconnects += 1 }
          unless e.message == last_error
            @logger.warn("taskengine worker #{@worker_id}: cannot lease (#{e.message}); retrying with backoff")
          end
          last_error = e.message
          sleep_unless_stopping(backoff + (rand * backoff / 2))
          backoff = [backoff * 2, @reconnect_max].min
          next
        ensure
          @abort = nil
        end
        @logger.info("taskengine worker #{@worker_id}: server reachable again") if last_error
        last_error = nil
        backoff = @reconnect_min
        next if leases.empty?

        confirmed = confirm_starts(leases)
        @mutex.synchronize do
          confirmed.each do |lease|
            ctx = JobContext.new(@client, lease)
            @held[[lease.id, lease.claim_version]] = ctx
            @queue << ctx
            @stats.leased += 1
          end
          @new_lease = true
          @changed.broadcast
        end
      end
    end

    def sleep_unless_stopping(seconds)
      @mutex.synchronize { @changed.wait(@mutex, seconds) unless @stopping }
    end

    def confirm_starts(leases)
      items = leases.map { |l| { "id" => l.id, "claim_version" => l.claim_version, "started" => true } }
      processed, failed = @mutex.synchronize { [@stats.completed + @stats.failed, @stats.failed] }
      confirmed = []
      begin
        answers = @client.heartbeats(@worker_id, items, processed: processed, failed: failed)
        if answers.size == leases.size
          confirmed = leases.each_with_index.select { |_, i| answers[i]["ok"] }.map(&:first)
        else
          @logger.warn("taskengine worker #{@worker_id}: could not confirm the start of #{leases.size} " \
                       "lease(s): unexpected answer")
        end
      rescue Error => e
        # Unconfirmed leases lapse and, never started, are requeued at no attempt's cost.
        @logger.warn("taskengine worker #{@worker_id}: could not confirm the start of #{leases.size} " \
                     "lease(s): #{e.message}")
      end
      dropped = leases.size - confirmed.size
      @mutex.synchronize do
        @stats.leased += dropped
        @stats.lost += dropped
      end
      confirmed
    end

    def handler_loop
      loop do
        ctx = @mutex.synchronize do
          @changed.wait(@mutex) while @queue.empty? && !@leasing_done
          @queue.shift
        end
        return if ctx.nil?

        # Leased while stopping: not started, given back so another worker runs it now.
        report(ctx, @stopping ? { kind: "release" } : run_one(ctx))
      end
    end

    def run_one(ctx)
      handler = @handlers[ctx.job]
      unless handler
        return { kind: "fail", class: "retryable",
                 error: "no handler for job #{ctx.job} on worker #{@worker_id} (it runs: #{@handlers.keys.sort.join(', ')})" }
      end
      { kind: "complete", result: handler.call(ctx, ctx.payload) }
    rescue Canceled
      { kind: "release" } # released while cancel is requested: ends canceled
    rescue LeaseLost
      ctx.mark_lost
      { kind: "release" }
    rescue EffectAmbiguous => e
      { kind: "fail", class: "ambiguous", error: e.message }
    rescue PermanentError => e
      { kind: "fail", class: "permanent", error: e.message }
    rescue RetryableError => e
      { kind: "fail", class: "retryable", error: e.message, retry_after_ms: ((e.retry_after || 0) * 1000).to_i }
    rescue StandardError => e
      @logger.error("taskengine worker #{@worker_id}: handler of job #{ctx.job} raised #{e.class}: #{e.message}")
      { kind: "fail", class: "retryable", error: "#{e.class}: #{e.message}" }
    end

    def report(ctx, outcome)
      lost = ctx.lost?
      lost = !finish(ctx, outcome) unless lost
      @mutex.synchronize do
        @held.delete([ctx.id, ctx.claim_version])
        key = if lost then :lost
              elsif outcome[:kind] == "complete" then :completed
              elsif outcome[:kind] == "fail" then :failed
              else :released
              end
        @stats[key] += 1
        @changed.broadcast
      end
    end

    # Sends the outcome; false when the claim turned out lost (or it could not be told).
    def finish(ctx, outcome)
      body = { "claim_version" => ctx.claim_version }
      body["result"] = outcome[:result] if outcome[:kind] == "complete" && !outcome[:result].nil?
      if outcome[:kind] == "fail"
        body.merge!("class" => outcome[:class], "error" => outcome[:error],
                    "retry_after_ms" => outcome[:retry_after_ms] || 0)
      end
      if outcome[:kind] != "complete" && (progress = ctx.take_progress)
        begin
          @client.worker_call(ctx.id, "heartbeat", "claim_version" => ctx.claim_version, "progress" => progress)
        rescue Error
          nil
        end
      end
      deadline = monotonic + @finish_retry_for
      backoff = @reconnect_min
      begin
        @client.worker_call(ctx.id, outcome[:kind], body)
        true
      rescue ApiError, TransportError => e
        return false if e.is_a?(ApiError) && %w[stale not_found].include?(e.code)

        if !e.retryable? || monotonic >= deadline
          @logger.error("taskengine worker #{@worker_id}: could not report execution #{ctx.id}: #{e.message}")
          return false
        end
        sleep(backoff)
        backoff = [backoff * 2, @reconnect_max].min
        retry
      end
    end

    def heartbeat_loop
      last = monotonic
      reported_down = false
      loop do
        held, processed, failed = @mutex.synchronize do
          loop do
            return if @heartbeat_done

            interval = @held.values.map { |c| c.lease.lease_ms }.select(&:positive?)
                             .map { |ms| ms / 3000.0 }.push(@idle_heartbeat).min
            interval = [interval, 0.02].max
            @new_lease = false
            wait = last + interval - monotonic
            break if wait <= 0

            @changed.wait(@mutex, wait)
          end
          [@held.values, @stats.completed + @stats.failed, @stats.failed]
        end
        last = monotonic
        items = held.map do |ctx|
          item = { "id" => ctx.id, "claim_version" => ctx.claim_version }
          progress = ctx.take_progress
          item["progress"] = progress if progress
          item
        end
        begin
          answers = @client.heartbeats(@worker_id, items, processed: processed, failed: failed)
        rescue Error => e
          @logger.warn("taskengine worker #{@worker_id}: heartbeat failed: #{e.message}") unless reported_down
          reported_down = true
          next
        end
        reported_down = false
        # Answers come in request order: each applies to its own lease.
        held.each_with_index { |ctx, i| ctx.apply(answers[i]) } if answers.size == held.size
      end
    end

    def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
