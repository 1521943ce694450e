# frozen_string_literal: true

require_relative "lib/taskengine/version"

Gem::Specification.new do |spec|
  spec.name = "taskengine"
  spec.version = Taskengine::VERSION
  spec.summary = "Client and worker SDK for a taskengine server"
  spec.description = "Dispatch jobs to a taskengine server and run them in Ruby workers over its HTTP " \
                     "worker protocol: long-poll leases, heartbeats, and the effect ledger's answers."
  spec.authors = ["taskengine"]
  spec.files = Dir["lib/**/*.rb", "examples/*.rb", "README.md"]
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 3.0"
end
