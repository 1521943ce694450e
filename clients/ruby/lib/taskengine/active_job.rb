# frozen_string_literal: true

require "active_job"
require_relative "../taskengine"

module Taskengine
  # ActiveJob on taskengine: the queue adapter dispatches each job to the
  # taskengine job "activejob-<queue name>" (job_name_for changes that) with
  # the job's serialized form as the payload; a Worker runs them with
  # ActiveJob.register.
  #
  #   # config/application.rb
  #   require "taskengine/active_job"
  #   config.active_job.queue_adapter = :taskengine   # Client from TASKENGINE_SERVER, TASKENGINE_TOKEN
  #
  #   # the worker process (after loading the application)
  #   worker = Taskengine::Worker.new(queues: ["apps"])
  #   Taskengine::ActiveJob.register(worker, "mailers")   # runs the queue_as :mailers jobs
  #   worker.run
  #
  # The idempotency key is "<job_id>:<executions>", so a dispatch the client
  # retries is admitted once, and ActiveJob's own retry_on (a new execution
  # count) is a new execution. Inside perform, `taskengine` (from
  # Taskengine::ActiveJob::Context) is the JobContext: effects, logs, progress.
  module ActiveJob
    # The taskengine job of an ActiveJob queue.
    def self.job_name_for(queue_name)
      "activejob-#{queue_name}"
    end

    # Registers on worker the runner of the ActiveJob queues queue_names.
    def self.register(worker, *queue_names)
      queue_names.each do |queue_name|
        worker.job(job_name_for(queue_name)) do |ctx, payload|
          Thread.current[:taskengine_context] = ctx
          ::ActiveJob::Base.execute(payload)
          nil
        ensure
          Thread.current[:taskengine_context] = nil
        end
      end
      worker
    end

    # Included in a job class: `taskengine` is the running execution's JobContext.
    module Context
      def taskengine
        Thread.current[:taskengine_context] or raise Error, "#{self.class} is not running in a taskengine worker"
      end
    end
  end
end

module ActiveJob
  module QueueAdapters
    # `queue_adapter = :taskengine`, or TaskengineAdapter.new(client: ...).
    class TaskengineAdapter
      def initialize(client: nil)
        @client = client
      end

      def enqueue(job)
        dispatch(job)
      end

      def enqueue_at(job, timestamp)
        dispatch(job, run_at: Time.at(timestamp))
      end

      private

      def dispatch(job, run_at: nil)
        @client ||= Taskengine::Client.new
        d = @client.dispatch(Taskengine::ActiveJob.job_name_for(job.queue_name), job.serialize,
                             idempotency_key: "#{job.job_id}:#{job.executions}", run_at: run_at)
        job.provider_job_id = d.id
        d
      end
    end
  end
end
