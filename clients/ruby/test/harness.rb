# frozen_string_literal: true

# What the scenario tests share: the live server's address and tokens (set by
# tests/clients/run.sh), workers run in a thread or in a child process, and
# waits that fail instead of hanging.
require "json"
require "logger"
require "securerandom"
require_relative "../lib/taskengine"

module Harness
  module_function

  def env(name)
    value = ENV.fetch(name, "")
    raise "#{name} is not set: run this test through tests/clients/run.sh ruby" if value.empty?

    value
  end

  def scenarios
    JSON.parse(File.read(env("TASKENGINE_TEST_SCENARIOS"))).fetch("scenarios")
  end

  CLIENTS = {} # rubocop:disable Style/MutableConstant

  def client(token_variable)
    CLIENTS[token_variable] ||= Taskengine::Client.new(server: env("TASKENGINE_SERVER"), token: env(token_variable))
  end

  def admin = client("TASKENGINE_TOKEN")
  def tenant = client("TASKENGINE_TEST_TENANT_TOKEN")

  def close_clients
    CLIENTS.each_value(&:close)
  end

  def unique(prefix) = "#{prefix}-#{SecureRandom.hex(6)}"

  def wait_until(what, timeout = 20)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      raise "timed out after #{timeout} s waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
  end

  # Runs the block while a Worker of queue with handlers runs in a thread;
  # stops it afterwards and re-raises what made it fail.
  def with_worker(queue, handlers)
    worker = Taskengine::Worker.new(client: client("TASKENGINE_TEST_WORKER_TOKEN"), queues: [queue],
                                    concurrency: 2, poll_wait: 1.0, logger: Logger.new(IO::NULL))
    handlers.each { |job, fn| worker.register(job, fn) }
    failure = nil
    thread = Thread.new do
      worker.run(handle_signals: false)
    rescue StandardError => e
      failure = e
    end
    begin
      yield worker
    ensure
      worker.stop
      raise "the worker did not stop within 20 s" unless thread.join(20)
      raise failure if failure && $!.nil?
    end
  end

  # test/child_worker.rb MODE in a child process, with its event file.
  class ChildWorker
    attr_reader :events, :go, :pid

    def initialize(mode)
      name = Harness.unique(mode)
      @events = File.join(Harness.env("TASKENGINE_TEST_WORK"), "ruby-#{name}.events")
      @go = File.join(Harness.env("TASKENGINE_TEST_WORK"), "ruby-#{name}.go")
      @out, writer = IO.pipe
      @pid = Process.spawn({ "TASKENGINE_TOKEN" => Harness.env("TASKENGINE_TEST_WORKER_TOKEN") },
                           RbConfig.ruby, File.join(__dir__, "child_worker.rb"), mode, @events, @go,
                           out: writer, in: File::NULL)
      writer.close
      @status = nil
    end

    def running?
      return false unless @status.nil?
      return true if Process.waitpid(@pid, Process::WNOHANG).nil?

      @status = :exited
      false
    end

    def lines
      File.exist?(@events) ? File.readlines(@events, chomp: true).reject(&:empty?) : []
    end

    def wait_for_event(prefix, timeout = 20)
      found = nil
      Harness.wait_until("child event #{prefix}", timeout) do
        found = lines.find { |line| line.start_with?(prefix) }
        raise "the child worker exited before #{prefix}; events: #{lines}" if found.nil? && !running?

        found
      end
      found
    end

    def signal(name)
      Process.kill(name, @pid) if running?
    end

    # SIGTERM, then the stats it prints at exit.
    def finish
      signal("TERM")
      out = @out.read
      status = reap
      raise "the child worker exited #{status.inspect}: #{out}" unless status&.success?

      JSON.parse(out.lines.last)
    end

    def kill
      if running?
        Process.kill("CONT", @pid)
        Process.kill("KILL", @pid)
      end
      reap
    end

    private

    # Waits for the process; its Process::Status (nil when reaped before).
    def reap
      status = (Process.wait2(@pid)[1] if @status.nil?)
      @status = :exited
      @out.close unless @out.closed?
      status
    rescue Errno::ECHILD
      @status = :exited
      nil
    end
  end
end
