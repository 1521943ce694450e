# frozen_string_literal: true

require "erb"
require "time"

module Taskengine
  # The answer to a dispatch: created is false for a repeat of an earlier key (HTTP 200).
  Dispatched = Struct.new(:id, :status, :created, :status_url, keyword_init: true) do
    alias_method :created?, :created
  end

  # One item of a bulk dispatch, in request order. conflict: the key was used
  # with a different payload; id names the existing execution and nothing was
  # created for this item.
  BulkResult = Struct.new(:index, :id, :status, :created, :conflict, :status_url, :error,
                          keyword_init: true)

  # One page of executions, newest first; next_cursor is nil at the end.
  Page = Struct.new(:items, :next_cursor, :total, keyword_init: true)

  # One leased execution as the worker protocol hands it out.
  Lease = Struct.new(:id, :claim_version, :job, :tenant, :queue, :attempt, :payload, :lease_ms,
                     :effect_key_prefix, :raw, keyword_init: true)

  # The public HTTP API (/api/v1) of a taskengine server.
  #
  #   client = Taskengine::Client.new  # TASKENGINE_SERVER and TASKENGINE_TOKEN
  #   d = client.dispatch("resize", {image: 7}, tenant: "acme", idempotency_key: "resize-7")
  #   execution = client.wait(d.id, timeout: 60)
  #
  # Failures raise Taskengine::Error classes. Ids are decimal strings (an
  # Integer is accepted wherever an id is passed). Reads, cancels and
  # dispatches that carry an idempotency key are retried after a transport
  # error or a 429/5xx answer; other writes are sent once. Thread-safe.
  class Client
    DEFAULT_SERVER = "http://127.0.0.1:8080"
    # Statuses an execution stays in until an operator acts (replay).
    TERMINAL_STATUSES = %w[succeeded failed quarantined canceled partially_canceled].freeze

    attr_reader :server

    # server: default TASKENGINE_SERVER, else http://127.0.0.1:8080.
    # token: default TASKENGINE_TOKEN (none when unset).
    # timeout: seconds per call (long polls add their wait). Default 30.
    # retries: extra tries of idempotent calls. Default 2.
    def initialize(server: nil, token: nil, timeout: 30.0, retries: 2)
      @server = server || ENV.fetch("TASKENGINE_SERVER", nil) || DEFAULT_SERVER
      @http = Transport.new(@server, token: token || ENV.fetch("TASKENGINE_TOKEN", ""), timeout: timeout,
                                     retries: retries, user_agent: "taskengine-ruby/#{VERSION}")
    end

    def timeout = @http.timeout
    def token = @http.token

    def close
      @http.close
    end

    # Admits one execution of job: created (HTTP 202) or a repeat of the key
    # (200, created false). Raises IdempotencyConflict (existing_execution_id)
    # when the key was used with a different payload; nothing is created then.
    # delay: seconds from now; run_at: a Time or an RFC 3339 string.
    def dispatch(job, payload = {}, tenant: nil, idempotency_key: nil, run_at: nil, delay: nil, lane: nil,
                 parent: nil)
      headers = idempotency_key ? { "Idempotency-Key" => idempotency_key } : {}
      doc = @http.call("POST", "/api/v1/jobs/#{seg(job)}/dispatch",
                       dispatch_body(payload, tenant, run_at, delay, lane, parent),
                       headers: headers, idempotent: !idempotency_key.nil?)
      Dispatched.new(id: doc["id"].to_s, status: doc["status"], created: doc["created"] == true,
                     status_url: doc["status_url"].to_s)
    end

    # Admits up to 1000 executions in one transaction. Items: hashes with :job
    # and optionally :payload, :tenant, :idempotency_key, :run_at, :delay, :lane,
    # :parent. An invalid item admits none (BadRequest, details "index").
    def dispatch_bulk(items)
      body = items.map do |item|
        entry = dispatch_body(item[:payload], item[:tenant], item[:run_at], item[:delay], item[:lane], item[:parent])
        entry["job"] = item.fetch(:job)
        entry["idempotency_key"] = item[:idempotency_key] if item[:idempotency_key]
        entry
      end
      doc = @http.call("POST", "/api/v1/dispatch/bulk", { "items" => body },
                       idempotent: body.all? { |e| e.key?("idempotency_key") })
      doc.fetch("items", []).each_with_index.map do |r, i|
        BulkResult.new(index: r.fetch("index", i), id: r["id"].to_s, status: r["status"],
                       created: r["created"] == true, conflict: r["conflict"] == true,
                       status_url: r["status_url"].to_s, error: r["error"])
      end
    end

    # Everything about one execution (payload, logs, effects, attempts, audit).
    def get(id)
      @http.call("GET", "/api/v1/executions/#{seg(id)}", idempotent: true)
    end

    def status(id)
      get(id)["status"]
    end

    # Polls until the execution reaches one of statuses (default: ended) and
    # returns it; raises WaitTimeout after timeout seconds.
    def wait(id, timeout: 60.0, poll: 0.2, statuses: TERMINAL_STATUSES)
      deadline = now + timeout
      loop do
        execution = get(id)
        return execution if statuses.include?(execution["status"])
        raise WaitTimeout.new(execution, timeout) if now >= deadline

        sleep([poll, [deadline - now, 0].max].min)
      end
    end

    # The JSON result of a succeeded execution (Conflict before success).
    def result(id)
      @http.call("GET", "/api/v1/executions/#{seg(id)}/result", idempotent: true)["result"]
    end

    # Cancels: at once when not running, else cancel_requested for its worker.
    def cancel(id, reason = nil)
      @http.call("POST", "/api/v1/executions/#{seg(id)}/cancel", reason ? { "reason" => reason } : {},
                 idempotent: true)
    end

    # Queues a failed or quarantined execution again under its id. assume
    # ("keep", "done", "not_done"): what to take of effects an earlier claim
    # reserved and never confirmed. "outcome": "replayed" or "pending_approval".
    def replay(id, reason, assume: nil)
      body = { "reason" => reason }
      body["assume"] = assume if assume
      @http.call("POST", "/api/v1/executions/#{seg(id)}/replay", body)
    end

    # One page of executions, newest first. status and trigger: one value or
    # an array (any of them); ranges: queued_from, queued_to, ended_from, ended_to.
    def list(job: nil, tenant: nil, status: nil, trigger: nil, limit: nil, cursor: nil, **ranges)
      query = { job: job, tenant: tenant, status: Array(status).join(","), trigger: Array(trigger).join(","),
                limit: limit, cursor: cursor, **ranges }.reject { |_, v| v.nil? || v.to_s.empty? }
      path = "/api/v1/executions"
      path += "?#{URI.encode_www_form(query)}" unless query.empty?
      doc = @http.call("GET", path, idempotent: true)
      Page.new(items: doc.fetch("items", []), next_cursor: doc["next_cursor"].to_s.empty? ? nil : doc["next_cursor"],
               total: doc["total"])
    end

    # Every execution matching the filters of #list, page after page (an Enumerator without a block).
    def each_execution(**filters, &block)
      return enum_for(:each_execution, **filters) unless block

      cursor = nil
      loop do
        page = list(**filters, cursor: cursor)
        page.items.each(&block)
        break unless (cursor = page.next_cursor)
      end
    end

    # ---- the worker protocol (used by Worker; see docs/openapi.json)

    def lease(worker_id, queues, max: 1, wait_ms: 0, abort: nil, **registration)
      body = { "worker_id" => worker_id, "queues" => queues, "max" => max, "wait_ms" => wait_ms }
      registration.each { |k, v| body[k.to_s] = v unless v.nil? || v == "" }
      doc = @http.call("POST", "/api/v1/worker/lease", body, timeout: @http.timeout + (wait_ms / 1000.0),
                                                             abort: abort)
      doc.fetch("leases", []).map do |l|
        Lease.new(id: l["id"].to_s, claim_version: l["claim_version"].to_i, job: l["job"].to_s, tenant: l["tenant"],
                  queue: l["queue"].to_s, attempt: l["attempt"].to_i, payload: l["payload"] || {},
                  lease_ms: l["lease_ms"].to_i, effect_key_prefix: l["effect_key_prefix"].to_s, raw: l)
      end
    end

    # One answer per item, in order: {"id", "ok", "cancel_requested", "error"}.
    def heartbeats(worker_id, items, processed: 0, failed: 0)
      @http.call("POST", "/api/v1/worker/heartbeats",
                 { "worker_id" => worker_id, "items" => items, "processed" => processed, "failed" => failed })
        .fetch("items", [])
    end

    # POST /api/v1/worker/executions/{id}/{action} (heartbeat, log, complete, ...).
    def worker_call(id, action, body)
      @http.call("POST", "/api/v1/worker/executions/#{seg(id)}/#{action}", body)
    end

    private

    def seg(value) = ERB::Util.url_encode(value.to_s)
    def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

    def dispatch_body(payload, tenant, run_at, delay, lane, parent)
      raise ArgumentError, "give run_at or delay, not both" if run_at && delay

      body = { "payload" => payload || {} }
      body["tenant"] = tenant if tenant && !tenant.empty?
      body["run_at"] = run_at.is_a?(Time) ? run_at.utc.iso8601(3) : run_at.to_s if run_at
      body["delay_ms"] = (delay * 1000).round if delay
      body["lane"] = lane if lane && !lane.empty?
      body["parent"] = Integer(parent) if parent
      body
    end
  end
end
