# frozen_string_literal: true

require "json"
require "net/http"
require "uri"

module Taskengine
  # HTTP/1.1 with keep-alive over Net::HTTP. #call sends one request and
  # returns the decoded JSON answer (nil for an empty body) or raises a
  # Taskengine::Error. A call marked idempotent is retried with backoff after a
  # transport error or a 429/502/503/504 answer. An Abort passed to #call ends
  # a long poll from another thread. Thread-safe.
  class Transport
    # The server closes a keep-alive connection idle for 10 s.
    KEEP_ALIVE = 5

    # Ends the call it is passed to, from any thread. Thread-safe.
    class Abort
      def initialize
        @mutex = Mutex.new
        @aborted = false
        @http = nil
      end

      def aborted? = @aborted

      def abort
        http = @mutex.synchronize do
          @aborted = true
          @http
        end
        http&.finish if http&.started?
      rescue IOError, SystemCallError
        nil
      end

      def attach(http)
        @mutex.synchronize do
          @http = http
          !@aborted
        end
      end
    end

    TRANSPORT_ERRORS = [IOError, SystemCallError, SocketError, Timeout::Error, EOFError,
                        Net::ProtocolError, OpenSSL::SSL::SSLError].freeze

    attr_accessor :token
    attr_reader :timeout

    def initialize(base_url, token: "", timeout: 30.0, retries: 2, backoff: 0.1, user_agent: "")
      @uri = URI.parse(base_url.sub(%r{/+\z}, ""))
      unless %w[http https].include?(@uri.scheme) && @uri.host
        raise ArgumentError, "server must be http(s)://host[:port], got #{base_url}"
      end
      @prefix = @uri.path.to_s
      @token = token
      @timeout = timeout
      @retries = retries
      @backoff = backoff
      @user_agent = user_agent
      @mutex = Mutex.new
      @idle = []
    end

    def close
      idle = @mutex.synchronize { @idle.slice!(0..) }
      idle.each { |http, _| http.finish if http.started? }
    end

    def call(method, path, body = nil, headers: {}, timeout: nil, idempotent: false, abort: nil)
      attempts = 1 + (idempotent ? @retries : 0)
      delay = @backoff
      attempt = 0
      begin
        attempt += 1
        once(method, path, body, headers, timeout || @timeout, abort)
      rescue Error => e
        raise if attempt >= attempts || !e.retryable? || abort&.aborted?

        wait = e.is_a?(TooManyRequests) ? [delay, [e.retry_after, 5.0].min].max : delay
        sleep(wait)
        delay *= 2
        retry
      end
    end

    private

    def connection
      now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      @mutex.synchronize do
        while (entry = @idle.pop)
          http, since = entry
          return http if now - since < KEEP_ALIVE && http.started?

          http.finish if http.started?
        end
      end
      http = Net::HTTP.new(@uri.host, @uri.port)
      http.use_ssl = @uri.scheme == "https"
      http.keep_alive_timeout = KEEP_ALIVE
      http.max_retries = 0
      http
    end

    def give_back(http)
      @mutex.synchronize { @idle << [http, Process.clock_gettime(Process::CLOCK_MONOTONIC)] }
    end

    def once(method, path, body, headers, timeout, abort)
      request = Net::HTTPGenericRequest.new(method, !body.nil?, true, @prefix + path)
      request["Accept"] = "application/json"
      request["Authorization"] = "Bearer #{@token}" unless @token.to_s.empty?
      request["User-Agent"] = @user_agent unless @user_agent.empty?
      headers.each { |name, value| request[name] = value }
      unless body.nil?
        request["Content-Type"] = "application/json"
        request.body = JSON.generate(body)
      end
      http = connection
      http.open_timeout = [timeout, 10].min
      http.read_timeout = timeout
      http.write_timeout = timeout
      begin
        http.start unless http.started?
        raise TransportError, "aborted" if abort && !abort.attach(http)

        response = http.request(request)
      rescue *TRANSPORT_ERRORS => e
        http.finish if http.started? rescue nil # rubocop:disable Style/RescueModifier
        raise TransportError, (abort&.aborted? ? "aborted" : "#{method} #{path}: #{e.message}")
      ensure
        abort&.attach(nil)
      end
      if response["connection"].to_s.casecmp?("close")
        http.finish
      else
        give_back(http)
      end
      decode(response)
    end

    def decode(response)
      status = response.code.to_i
      text = response.body.to_s
      doc = nil
      unless text.empty?
        begin
          doc = JSON.parse(text)
        rescue JSON::ParserError
          raise ApiError.for(status, status == 503 ? "unavailable" : "internal", text[0, 200])
        end
      end
      if status.between?(200, 299)
        doc["status_url"] ||= response["location"] if doc.is_a?(Hash) && response["location"]
        return doc
      end
      error = doc.is_a?(Hash) && doc["error"].is_a?(Hash) ? doc["error"] : {}
      details = error["details"].is_a?(Hash) ? error["details"].dup : {}
      details["retry_after"] ||= response["retry-after"] if response["retry-after"]
      code = error["code"] || (status == 503 ? "unavailable" : "internal")
      raise ApiError.for(status, code, error["message"] || "HTTP #{status}", details)
    end
  end
end
