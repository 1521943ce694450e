# frozen_string_literal: true

# Errors of the taskengine client. Every failed call raises a Taskengine::Error:
# an ApiError when the server answered (the API's stable code such as
# "not_found", "conflict" or "stale", the HTTP status and the error's details),
# a TransportError when no answer came (refused, reset, timed out).
module Taskengine
  class Error < StandardError
    def retryable?
      false
    end
  end

  # No HTTP answer: the server is down, restarting or unreachable.
  class TransportError < Error
    def http_status = 0
    def code = "unavailable"

    def retryable?
      true
    end
  end

  # The server answered with an error document.
  class ApiError < Error
    attr_reader :http_status, :code, :api_message, :details

    def initialize(http_status, code, message, details = {})
      super("#{code} (HTTP #{http_status}): #{message}")
      @http_status = http_status
      @code = code
      @api_message = message
      @details = details
    end

    def retryable?
      [429, 502, 503, 504].include?(http_status)
    end

    # The subclass for an answer's status and code.
    def self.for(http_status, code, message, details = {})
      klass =
        if http_status == 429 then TooManyRequests
        elsif code == "conflict" && details.key?("existing_execution_id") then IdempotencyConflict
        else BY_CODE.fetch(code, ApiError)
        end
      klass.new(http_status, code, message, details)
    end
  end

  class BadRequest < ApiError; end
  class Unauthenticated < ApiError; end
  class Forbidden < ApiError; end
  # Missing, or another tenant's: the API does not tell them apart.
  class NotFound < ApiError; end
  class Conflict < ApiError; end

  # 409 on dispatch: the idempotency key was used with a different payload.
  # Nothing was created; existing_execution_id names the key's execution.
  class IdempotencyConflict < Conflict
    def existing_execution_id
      details["existing_execution_id"].to_s
    end
  end

  # 409 stale: the claim version is no longer current (the lease was lost).
  class Stale < ApiError; end

  # 429: over a rate limit; retry_after is the server's hint in seconds.
  class TooManyRequests < ApiError
    def retry_after
      Float(details.fetch("retry_after", 1))
    rescue ArgumentError, TypeError
      1.0
    end
  end

  class Unavailable < ApiError; end

  # Client#wait: the execution did not end in time; `execution` is its last state.
  class WaitTimeout < Error
    attr_reader :execution

    def initialize(execution, timeout)
      super("execution #{execution['id']} is still #{execution['status']} after #{timeout} s")
      @execution = execution
    end
  end

  ApiError::BY_CODE = {
    "invalid_argument" => BadRequest, "bad_request" => BadRequest,
    "unauthenticated" => Unauthenticated, "forbidden" => Forbidden, "not_found" => NotFound,
    "conflict" => Conflict, "stale" => Stale, "unavailable" => Unavailable
  }.freeze

  # Base of the errors that stop a handler on the SDK's behalf.
  class HandlerStop < Error; end
  # Cancellation was requested: the handler stops; the execution ends canceled.
  class Canceled < HandlerStop; end
  # This claim is no longer current (stale): nothing the handler does is published.
  class LeaseLost < HandlerStop; end

  # An earlier claim reserved the effect and never confirmed it; its outcome is unknown.
  class EffectAmbiguous < HandlerStop
    attr_reader :key

    def initialize(key)
      super("effect #{key} was reserved by an earlier attempt that never confirmed it; " \
            "its outcome is unknown")
      @key = key
    end
  end

  # Fail this attempt; the server retries after its backoff (or retry_after seconds).
  class RetryableError < StandardError
    attr_reader :retry_after

    def initialize(message, retry_after: nil)
      super(message)
      @retry_after = retry_after
    end
  end

  # Fail for good: retrying cannot help (the execution is quarantined).
  class PermanentError < StandardError; end

  # Raised by an effect block: the effect certainly did not happen, so the
  # reservation is given back and a retry proceeds. Any other error leaves the
  # effect's outcome unknown.
  class NotPerformed < StandardError; end
end
