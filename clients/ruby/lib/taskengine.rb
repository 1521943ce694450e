# frozen_string_literal: true

# taskengine: the client and worker SDK of a taskengine server, over its HTTP API.
require_relative "taskengine/version"
require_relative "taskengine/errors"
require_relative "taskengine/transport"
require_relative "taskengine/client"
require_relative "taskengine/job_context"
require_relative "taskengine/worker"
