# frozen_string_literal: true

# The client conformance scenarios (clients/scenarios.json) against a live
# server: one test per scenario id; an id without an implementation here fails.
# Run through tests/clients/run.sh ruby (ctest clients_ruby_test).
require "minitest/autorun"
require "open3"
require "time"
require_relative "harness"

class ScenariosTest < Minitest::Test
  # Tests run in file order: the child workers and servers are shared state.
  i_suck_and_my_tests_are_order_dependent!

  Minitest.after_run { Harness.close_clients }

  def dispatch_idempotency(s)
    client = Harness.admin
    key = Harness.unique("ruby-key")
    first = client.dispatch(s["job"], { "n" => 1 }, idempotency_key: key)
    assert first.created?
    assert_equal "queued", first.status
    assert_equal "/api/v1/executions/#{first.id}", first.status_url
    again = client.dispatch(s["job"], { "n" => 1 }, idempotency_key: key)
    assert_equal [first.id, false], [again.id, again.created]
    e = assert_raises(Taskengine::IdempotencyConflict) { client.dispatch(s["job"], { "n" => 2 }, idempotency_key: key) }
    assert_equal 409, e.http_status
    assert_equal first.id, e.existing_execution_id

    bulk = client.dispatch_bulk([
                                  { job: s["job"], payload: { "n" => 1 }, idempotency_key: key },
                                  { job: s["job"], payload: { "n" => 2 }, idempotency_key: key },
                                  { job: s["job"], payload: { "n" => 3 }, idempotency_key: Harness.unique("ruby-key"),
                                    delay: 60, lane: "ruby-lane" }
                                ])
    assert_equal [[first.id, false, false], [first.id, false, true]], bulk[0, 2].map { |r| [r.id, r.created, r.conflict] }
    assert bulk[2].created
    refute_equal first.id, bulk[2].id
    assert_equal "ruby-lane", client.get(bulk[2].id)["lane_key"]

    run_at = Time.now.utc + 3600
    later = client.dispatch(s["job"], { "n" => 4 }, run_at: run_at)
    execution = client.get(later.id)
    assert_equal "queued", execution["status"]
    assert execution["run_at"].start_with?(run_at.strftime("%Y-%m-%dT%H:%M")), execution["run_at"]
  end

  def list_pagination(s)
    client = Harness.admin
    ids = Array.new(s["count"]) { |i| client.dispatch(s["job"], { "i" => i }).id }
    seen = []
    cursor = nil
    loop do
      page = client.list(job: s["job"], status: ["queued"], limit: s["page_size"], cursor: cursor)
      assert_operator page.items.size, :<=, s["page_size"]
      seen.concat(page.items.map { |e| e["id"].to_s })
      break unless (cursor = page.next_cursor)
    end
    assert_equal ids.sort_by { |id| -id.to_i }, seen
    assert_equal seen, client.each_execution(job: s["job"], limit: 2).map { |e| e["id"].to_s }
  end

  def effect_completes(s)
    client = Harness.admin
    sunk = Queue.new
    handler = lambda do |ctx, _payload|
      detail = ctx.effect(s["effect"]) do |key|
        sunk << key
        "sms-#{sunk.size}"
      end
      ctx.log("sms sent")
      ctx.progress(100)
      { "sms" => detail }
    end
    d = client.dispatch(s["job"], { "to" => "+15550100" })
    execution = Harness.with_worker(s["queue"], s["job"] => handler) { client.wait(d.id, timeout: 20) }
    assert_equal "succeeded", execution["status"], execution.to_json
    assert_equal({ "sms" => "sms-1" }, client.result(d.id))
    key = "#{d.id}:#{s['effect']}"
    assert_equal [key], Array.new(sunk.size) { sunk.pop }
    assert_equal [[s["effect"], key, "committed", "sms-1"]],
                 execution["effects"].map { |e| e.values_at("name", "key", "state", "detail") }
    assert_includes execution["logs"].map { |l| l["message"] }, "sms sent"
  end

  def crash_between_effect_and_commit(s)
    client = Harness.admin
    d = client.dispatch(s["job"], { "amount" => 42 })
    child = Harness::ChildWorker.new("crash")
    begin
      child.wait_for_event("sink ")
    ensure
      child.kill
    end
    sunk_again = Queue.new
    handler = lambda do |ctx, _payload|
      { "charged" => ctx.effect(s["effect"]) { |key| sunk_again << key && "charge-2" } }
    end
    execution = Harness.with_worker(s["queue"], s["job"] => handler) do
      quarantined = client.wait(d.id, timeout: 30)
      assert_equal "quarantined", quarantined["status"], quarantined.to_json
      assert_equal "ambiguous", quarantined["failure_class"]
      assert_equal 0, sunk_again.size
      assert_equal ["sink #{d.id}:#{s['effect']}"], child.lines
      assert_equal [[s["effect"], "reserved"]], quarantined["effects"].map { |e| e.values_at("name", "state") }
      replay = client.replay(d.id, "the card gateway shows the charge", assume: "done")
      assert_equal "replayed", replay["outcome"]
      client.wait(d.id, timeout: 20)
    end
    assert_equal "succeeded", execution["status"], execution.to_json
    assert_equal 0, sunk_again.size
    assert_equal 1, child.lines.size
  end

  def stopped_worker_is_stale(s)
    client = Harness.admin
    d = client.dispatch(s["job"], {})
    child = Harness::ChildWorker.new("stall")
    stats = nil
    begin
      assert_equal "started #{d.id}", child.wait_for_event("started ")
      child.signal("STOP")
      execution = Harness.with_worker(s["queue"], s["job"] => ->(_ctx, _p) { { "by" => "second" } }) do
        client.wait(d.id, timeout: 30)
      end
      assert_equal "succeeded", execution["status"], execution.to_json
      child.signal("CONT")
      File.write(child.go, "")
      child.wait_for_event("stale")
      stats = child.finish
    ensure
      child.kill
    end
    assert_equal [1, 0], stats.values_at("lost", "completed"), stats.to_json
    assert_equal({ "by" => "second" }, client.result(d.id))
    assert_equal "succeeded", client.status(d.id)
  end

  def long_handler_keeps_lease(s)
    client = Harness.admin
    handler = lambda do |ctx, _payload|
      ctx.progress(50)
      sleep(s["block_ms"] / 1000.0)
      { "slept_ms" => s["block_ms"] }
    end
    d = client.dispatch(s["job"], {})
    execution = Harness.with_worker(s["queue"], s["job"] => handler) { client.wait(d.id, timeout: 20) }
    assert_equal %w[succeeded 1], [execution["status"], execution["attempt"].to_s], execution.to_json
    assert_equal 0, execution["consecutive_lease_expiries"]
    assert_equal({ "slept_ms" => s["block_ms"] }, client.result(d.id))
  end

  def sigterm_finishes_running_handler(s)
    client = Harness.admin
    d = client.dispatch(s["job"], {})
    child = Harness::ChildWorker.new("graceful")
    stats = nil
    begin
      assert_equal "started #{d.id}", child.wait_for_event("started ")
      stats = child.finish
    ensure
      child.kill
    end
    assert_equal [1, 1], stats.values_at("completed", "leased"), stats.to_json
    execution = client.get(d.id)
    assert_equal ["succeeded", 1], execution.values_at("status", "attempt"), execution.to_json
    assert_equal({ "finished" => true }, client.result(d.id))
  end

  def cancel_seen_by_handler(s)
    client = Harness.admin
    started = Queue.new
    seen = false
    handler = lambda do |ctx, _payload|
      started << true
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        begin
          ctx.checkpoint
        rescue Taskengine::Canceled
          seen = true
          raise
        end
        sleep 0.02
      end
      { "cancel" => "never seen" }
    end
    d = client.dispatch(s["job"], {})
    execution = Harness.with_worker(s["queue"], s["job"] => handler) do
      Harness.wait_until("the handler to start") { !started.empty? }
      answer = client.cancel(d.id, "the customer withdrew")
      assert answer["cancel_requested"], answer.to_json
      client.wait(d.id, timeout: 20)
    end
    assert seen
    assert_equal "canceled", execution["status"], execution.to_json
  end

  def bad_token_401(_s)
    bad = Taskengine::Client.new(server: Harness.env("TASKENGINE_SERVER"), token: "te_not_a_token")
    [-> { bad.get("1") }, -> { bad.dispatch("sdk-echo", {}) }].each do |call|
      e = assert_raises(Taskengine::Unauthenticated) { call.call }
      assert_equal 401, e.http_status
    end
    worker = Taskengine::Worker.new(client: bad, queues: ["sdk-idle"], poll_wait: 0.5, logger: Logger.new(IO::NULL))
    worker.job("sdk-echo") { nil }
    assert_raises(Taskengine::Unauthenticated) { worker.run(handle_signals: false) }
  ensure
    bad&.close
  end

  def other_tenant_404(s)
    theirs = Harness.admin.dispatch(s["job"], { "store" => 2 }, tenant: "b")
    mine = Harness.tenant
    [theirs.id, "987654321"].each do |id|
      [-> { mine.get(id) }, -> { mine.cancel(id) }, -> { mine.result(id) }].each do |call|
        e = assert_raises(Taskengine::NotFound) { call.call }
        assert_equal 404, e.http_status
      end
    end
    own = mine.dispatch(s["job"], { "store" => 1 }, tenant: "a")
    assert_equal "a", mine.get(own.id)["tenant"]
  end

  def examples_run(_s)
    examples = File.expand_path("../examples", __dir__)
    reader, writer = IO.pipe
    worker = Process.spawn({ "TASKENGINE_TOKEN" => Harness.env("TASKENGINE_TEST_WORKER_TOKEN") },
                           RbConfig.ruby, File.join(examples, "worker.rb"), out: writer, err: writer, in: File::NULL)
    writer.close
    outputs = []
    begin
      2.times do
        out, status = Open3.capture2e(RbConfig.ruby, File.join(examples, "dispatcher.rb"))
        assert status.success?, out
        outputs << out
      end
    ensure
      Process.kill("TERM", worker)
      worker_out = reader.read
      _, worker_status = Process.wait2(worker)
      reader.close
    end
    assert_match(/created/, outputs[0])
    assert_match(/already dispatched/, outputs[1])
    outputs.each do |out|
      assert_match(/succeeded/, out)
      assert_match(/message_id/, out)
    end
    assert worker_status.success?, worker_out
    assert_equal 1, worker_out.scan("SMS to +15550100").size, worker_out
  end

  Harness.scenarios.each do |scenario|
    define_method("test_#{scenario['id']}") do
      unless respond_to?(scenario["id"], true)
        flunk "scenario #{scenario['id']} (#{scenario['title']}) is not implemented by the Ruby client's tests"
      end
      send(scenario["id"], scenario)
    end
  end
end
