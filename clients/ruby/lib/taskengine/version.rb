# frozen_string_literal: true

module Taskengine
  # The server's version (CMakeLists.txt project VERSION).
  VERSION = "0.1.0"
end
