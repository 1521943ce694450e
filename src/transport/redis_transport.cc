#include "transport/redis_transport.h"

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/mutex.h"
#include "platform/sigpipe.h"
#include "platform/thread_name.h"
#include "transport/redis_url.h"

namespace taskengine {
namespace {

std::string DefaultNodeId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "localhost");
  }
  std::string id;
  for (const char* p = host; *p != '\0' && id.size() < 64; ++p) {
    const char c = *p;
    id += IsRedisKeyPart(std::string_view(&c, 1), 1) ? c : '_';
  }
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ":%d:%08x", static_cast<int>(getpid()), rd());
  return id + suffix;
}

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval ToTimeval(Millis ms) {
  return timeval{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

// One connection (not thread-safe, except Interrupt()).
class RedisConn {
 public:
  RedisConn() = default;
  ~RedisConn() { Close(); }
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  bool connected() const { return c_ != nullptr; }

  // Connects, authenticates and selects the database; `read_timeout_ms`
  // bounds every later reply.
  Status Connect(const RedisUrl& url, Millis connect_timeout_ms, Millis read_timeout_ms)
      EXCLUDES(fd_mu_) {
    Close();
    redisContext* c =
        redisConnectWithTimeout(url.host.c_str(), url.port, ToTimeval(connect_timeout_ms));
    if (c == nullptr) return Unavailable("Redis: out of memory");
    if (c->err != 0) {
      std::string why = c->errstr;
      redisFree(c);
      return Unavailable("Redis " + url.host + ":" + std::to_string(url.port) + ": " + why);
    }
    {
      MutexLock lock(fd_mu_);
      c_ = c;
    }
    if (redisSetTimeout(c_, ToTimeval(read_timeout_ms)) != REDIS_OK) {
      Close();
      return Unavailable("Redis: cannot set the timeout");
    }
    if (!url.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!url.user.empty()) auth.push_back(url.user);
      auth.push_back(url.password);
      Result<Reply> r = Command(auth);
      if (!r.ok()) return Unavailable("Redis AUTH failed: " + r.status().message());
    }
    if (url.db != 0) {
      Result<Reply> r = Command({"SELECT", std::to_string(url.db)});
      if (!r.ok()) return r.status();
    }
    return Status::Ok();
  }

  void Close() EXCLUDES(fd_mu_) {
    MutexLock lock(fd_mu_);
    if (c_ != nullptr) redisFree(c_);
    c_ = nullptr;
  }

  // Wakes a call blocked in this connection from another thread: the call
  // fails and the connection is closed by its owner.
  void Interrupt() EXCLUDES(fd_mu_) {
    MutexLock lock(fd_mu_);
    if (c_ != nullptr) ::shutdown(c_->fd, SHUT_RDWR);
  }

  // One command; an error reply is kUnavailable (the caller reconnects).
  Result<Reply> Command(const std::vector<std::string>& args) {
    TE_RETURN_IF_ERROR(Append(args));
    return Next();
  }

  // Pipelining: Append, then Next once per appended command.
  Status Append(const std::vector<std::string>& args) {
    if (c_ == nullptr) return Unavailable("Redis: not connected");
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return Failed();
    }
    return Status::Ok();
  }

  // Sends what was appended and not yet sent (hiredis writes its output
  // buffer with write(2)), then reads one reply. A write to a connection
  // that Redis closed or Interrupt() shut down fails with EPIPE; SIGPIPE is
  // blocked meanwhile, so it cannot end the process (an embedding
  // application keeps its own disposition). With nothing to send (the later
  // replies of a pipeline), no guard and no signal-mask calls.
  Result<Reply> Next() {
    if (c_ == nullptr) return Unavailable("Redis: not connected");
    void* raw = nullptr;
    int rc = REDIS_ERR;
    if (sdslen(c_->obuf) > 0) {
      ScopedSigpipeBlock no_sigpipe;
      rc = redisGetReply(c_, &raw);
    } else {
      rc = redisGetReply(c_, &raw);
    }
    if (rc != REDIS_OK || raw == nullptr) return Failed();
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {
      return Unavailable("Redis: " + std::string(r->str, r->len));
    }
    return r;
  }

 private:
  Status Failed() {
    std::string why = c_->errstr[0] != '\0' ? c_->errstr : "connection lost";
    Close();
    return Unavailable("Redis: " + why);
  }

  Mutex fd_mu_;
  redisContext* c_ = nullptr;  // written under fd_mu_; used by the owning thread
};

// Moves up to ARGV[1] entries from KEYS[1] to KEYS[2]; returns how many.
constexpr const char* kMoveMore =
    "local n = 0 "
    "for i = 1, tonumber(ARGV[1]) do "
    "  if not redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') then break end "
    "  n = n + 1 "
    "end "
    "return n";

class RedisTransport final : public WorkTransport {
 public:
  RedisTransport(RedisTransportOptions options, RedisUrl url)
      : options_(std::move(options)),
        url_(std::move(url)),
        clock_(SystemClock::Get()),
        nodes_key_(options_.prefix + ":nodes"),
        node_key_(NodeKey(options_.node_id)),
        pending_key_(PendingKey(options_.node_id)),
        processing_key_(ProcessingKey(options_.node_id)) {
    publisher_ = NamedThread("te-redis-pub", [this] { PublishLoop(); });
  }

  ~RedisTransport() override {
    Stop();
    {
      MutexLock lock(mu_);
      stop_publisher_ = true;
    }
    cv_.NotifyAll();
    if (publisher_.joinable()) publisher_.join();
  }

  void Start(std::function<void()> on_work) override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (consumer_.joinable()) return;
    on_work_ = std::move(on_work);
    stop_consumer_ = false;
    consumer_ = NamedThread("te-redis-sub", [this] { ConsumeLoop(); });
  }

  void Stop() override EXCLUDES(mu_) {
    std::thread consumer;
    {
      MutexLock lock(mu_);
      if (!consumer_.joinable()) return;
      stop_consumer_ = true;
      consumer = std::move(consumer_);
    }
    cv_.NotifyAll();
    sub_.Interrupt();
    consumer.join();
  }

  void Publish(const std::string& queue) override EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (!want_publish_) {
        want_publish_ = true;
        publish_queue_ = queue;
      }
    }
    cv_.NotifyAll();
  }

  TransportStats stats() const override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    TransportStats s = stats_;
    s.enabled = true;
    s.connected = sub_connected_;
    return s;
  }

 private:
  std::string NodeKey(const std::string& node) const { return options_.prefix + ":node:" + node; }
  std::string PendingKey(const std::string& node) const {
    return options_.prefix + ":pending:" + node;
  }
  std::string ProcessingKey(const std::string& node) const {
    return options_.prefix + ":processing:" + node;
  }

  // Waits `ms` or until `stop` is set; true when stopped.
  bool Pause(Millis ms, const bool& stop) REQUIRES(mu_) {
    const auto deadline = clock_->Steady() + std::chrono::milliseconds(ms);
    while (!stop) {
      const auto now = clock_->Steady();
      if (now >= deadline) return false;
      cv_.WaitFor(mu_, deadline - now);
    }
    return true;
  }

  // --- publishing ---

  void PublishLoop() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (true) {
      while (!stop_publisher_ && !want_publish_) cv_.Wait(mu_);
      if (stop_publisher_) return;
      const std::string queue = std::move(publish_queue_);
      want_publish_ = false;
      lock.Unlock();
      const Status st = Flush(queue);
      lock.Lock();
      if (st.ok()) {
        ++stats_.published;
      } else {
        ++stats_.dropped;
      }
    }
  }

  // Pushes one entry to the ready list of every live node.
  Status Flush(const std::string& queue) {
    TE_RETURN_IF_ERROR(EnsurePublisher());
    const auto now = clock_->Steady();
    if (nodes_.empty() || now - nodes_read_at_ >= std::chrono::seconds(1)) {
      Result<Reply> members = pub_.Command({"SMEMBERS", nodes_key_});
      if (!members.ok()) return Lost(members.status());
      nodes_.clear();
      for (std::size_t i = 0; i < (*members)->elements; ++i) {
        const redisReply* e = (*members)->element[i];
        if (e->type == REDIS_REPLY_STRING) nodes_.emplace_back(e->str, e->len);
      }
      nodes_read_at_ = now;
      MutexLock lock(mu_);
      stats_.nodes = static_cast<std::int64_t>(nodes_.size());
    }
    const std::string entry =
        options_.node_id + "\t" + std::to_string(clock_->NowMillis()) + "\t" + queue;
    const std::string keep = std::to_string(-options_.max_list);
    const std::string expire = std::to_string(3 * options_.node_ttl_ms);
    int sent = 0;
    for (const std::string& node : nodes_) {
      const std::string key = PendingKey(node);
      TE_RETURN_IF_ERROR(pub_.Append({"RPUSH", key, entry}));
      TE_RETURN_IF_ERROR(pub_.Append({"LTRIM", key, keep, "-1"}));
      TE_RETURN_IF_ERROR(pub_.Append({"PEXPIRE", key, expire}));
      sent += 3;
    }
    for (int i = 0; i < sent; ++i) {
      Result<Reply> r = pub_.Next();
      if (!r.ok()) return Lost(r.status());
    }
    return Status::Ok();
  }

  Status EnsurePublisher() {
    if (pub_.connected()) return Status::Ok();
    const auto now = clock_->Steady();
    if (now < pub_retry_at_) return Unavailable("Redis: waiting to reconnect");
    const Status st = pub_.Connect(url_, options_.connect_timeout_ms, options_.command_timeout_ms);
    if (!st.ok()) {
      pub_backoff_ms_ = pub_backoff_ms_ == 0
                            ? options_.reconnect_min_ms
                            : std::min(2 * pub_backoff_ms_, options_.reconnect_max_ms);
      pub_retry_at_ = now + std::chrono::milliseconds(pub_backoff_ms_);
      if (!pub_warned_) {
        spdlog::warn(
            "redis transport: cannot publish wakeups ({}); pickup on other nodes waits "
            "for their poll until Redis is back",
            st.message());
        pub_warned_ = true;
      }
      return st;
    }
    if (pub_warned_) spdlog::info("redis transport: publishing wakeups again");
    pub_warned_ = false;
    pub_backoff_ms_ = 0;
    nodes_.clear();
    MutexLock lock(mu_);
    if (pub_ever_connected_) ++stats_.reconnects;
    pub_ever_connected_ = true;
    return Status::Ok();
  }

  Status Lost(const Status& st) {
    pub_.Close();
    return st;
  }

  // --- consuming ---

  void ConsumeLoop() EXCLUDES(mu_) {
    Millis backoff = options_.reconnect_min_ms;
    bool warned = false;
    bool ever = false;
    auto next_heartbeat = clock_->Steady();
    auto next_reap = clock_->Steady();
    while (!Stopping()) {
      if (!sub_.connected()) {
        const Status st = ConnectConsumer();
        SetSubConnected(st.ok());
        if (!st.ok()) {
          if (!warned && !Stopping()) {
            spdlog::warn(
                "redis transport: cannot take wakeups ({}); this node picks up work "
                "at its poll until Redis is back",
                st.message());
            warned = true;
          }
          MutexLock lock(mu_);
          if (Pause(backoff, stop_consumer_)) return;
          backoff = std::min(2 * backoff, options_.reconnect_max_ms);
          continue;
        }
        if (warned) spdlog::info("redis transport: taking wakeups again");
        if (ever) {
          MutexLock lock(mu_);
          ++stats_.reconnects;
        }
        warned = false;
        ever = true;
        backoff = options_.reconnect_min_ms;
        next_heartbeat = clock_->Steady();
      }
      const auto now = clock_->Steady();
      if (now >= next_heartbeat) {
        if (!Heartbeat().ok()) continue;
        next_heartbeat =
            now + std::chrono::milliseconds(std::max<Millis>(options_.node_ttl_ms / 4, 1));
        if (now >= next_reap) {
          if (!Reap().ok()) continue;
          next_reap = now + std::chrono::milliseconds(options_.node_ttl_ms);
        }
      }
      (void)TakeWakeups();
    }
  }

  bool Stopping() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stop_consumer_;
  }

  void SetSubConnected(bool connected) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    sub_connected_ = connected;
  }

  // Connects, registers this node and moves back what it had reserved.
  Status ConnectConsumer() {
    TE_RETURN_IF_ERROR(sub_.Connect(url_, options_.connect_timeout_ms,
                                    options_.block_ms + options_.command_timeout_ms));
    TE_RETURN_IF_ERROR(Heartbeat());
    for (int i = 0; i < options_.max_list; ++i) {
      Result<Reply> r = sub_.Command({"LMOVE", processing_key_, pending_key_, "RIGHT", "LEFT"});
      if (!r.ok()) return r.status();
      if ((*r)->type == REDIS_REPLY_NIL) break;
    }
    return Status::Ok();
  }

  Status Heartbeat() {
    TE_RETURN_IF_ERROR(
        sub_.Append({"SET", node_key_, "1", "PX", std::to_string(options_.node_ttl_ms)}));
    TE_RETURN_IF_ERROR(sub_.Append({"SADD", nodes_key_, options_.node_id}));
    for (int i = 0; i < 2; ++i) {
      Result<Reply> r = sub_.Next();
      if (!r.ok()) return r.status();
    }
    return Status::Ok();
  }

  // Drops the nodes whose liveness key expired, with their lists.
  Status Reap() {
    Result<Reply> members = sub_.Command({"SMEMBERS", nodes_key_});
    if (!members.ok()) return members.status();
    std::vector<std::string> nodes;
    for (std::size_t i = 0; i < (*members)->elements; ++i) {
      const redisReply* e = (*members)->element[i];
      if (e->type == REDIS_REPLY_STRING) nodes.emplace_back(e->str, e->len);
    }
    for (const std::string& node : nodes) {
      if (node == options_.node_id) continue;
      Result<Reply> alive = sub_.Command({"EXISTS", NodeKey(node)});
      if (!alive.ok()) return alive.status();
      if ((*alive)->integer != 0) continue;
      Result<Reply> removed = sub_.Command({"SREM", nodes_key_, node});
      if (!removed.ok()) return removed.status();
      Result<Reply> gone = sub_.Command({"DEL", PendingKey(node), ProcessingKey(node)});
      if (!gone.ok()) return gone.status();
      spdlog::info("redis transport: node {} stopped heartbeating; dropped it", node);
    }
    return Status::Ok();
  }

  // One BLMOVE: reserves a wakeup, wakes the engine, reserves those queued
  // behind it (waking the engine again when there were some: they may come
  // from commits after its claim), acks them all.
  Status TakeWakeups() EXCLUDES(mu_) {
    char block[32];
    std::snprintf(block, sizeof(block), "%.3f", static_cast<double>(options_.block_ms) / 1000.0);
    Result<Reply> r =
        sub_.Command({"BLMOVE", pending_key_, processing_key_, "LEFT", "RIGHT", block});
    if (!r.ok()) return SubLost(r.status());
    if ((*r)->type != REDIS_REPLY_STRING) return Status::Ok();  // timed out
    Wake();
    Result<Reply> more = sub_.Command(
        {"EVAL", kMoveMore, "2", pending_key_, processing_key_, std::to_string(options_.max_list)});
    if (!more.ok()) return SubLost(more.status());
    const std::int64_t extra = std::max<long long>((*more)->integer, 0);
    if (extra > 0) Wake();
    Result<Reply> ack = sub_.Command({"DEL", processing_key_});
    {
      MutexLock lock(mu_);
      stats_.received += 1 + extra;
    }
    return ack.ok() ? Status::Ok() : SubLost(ack.status());
  }

  void Wake() EXCLUDES(mu_) {
    std::function<void()> on_work;
    {
      MutexLock lock(mu_);
      on_work = on_work_;
    }
    if (on_work) on_work();
  }

  Status SubLost(const Status& st) EXCLUDES(mu_) {
    sub_.Close();
    SetSubConnected(false);
    return st;
  }

  const RedisTransportOptions options_;
  const RedisUrl url_;
  Clock* const clock_;
  const std::string nodes_key_;
  const std::string node_key_;
  const std::string pending_key_;
  const std::string processing_key_;

  mutable Mutex mu_;
  CondVar cv_;
  bool stop_publisher_ GUARDED_BY(mu_) = false;
  bool stop_consumer_ GUARDED_BY(mu_) = false;
  bool want_publish_ GUARDED_BY(mu_) = false;
  std::string publish_queue_ GUARDED_BY(mu_);
  std::function<void()> on_work_ GUARDED_BY(mu_);
  TransportStats stats_ GUARDED_BY(mu_);
  bool sub_connected_ GUARDED_BY(mu_) = false;
  bool pub_ever_connected_ GUARDED_BY(mu_) = false;

  // The publisher thread's own.
  RedisConn pub_;
  std::vector<std::string> nodes_;
  std::chrono::steady_clock::time_point nodes_read_at_{};
  std::chrono::steady_clock::time_point pub_retry_at_{};
  Millis pub_backoff_ms_ = 0;
  bool pub_warned_ = false;

  // The consumer thread's own (Interrupt() from Stop()).
  RedisConn sub_;

  std::thread publisher_;
  std::thread consumer_ GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<WorkTransport>> OpenRedisTransport(RedisTransportOptions options) {
  TE_ASSIGN_OR_RETURN(RedisUrl url, ParseRedisUrl(options.url));
  TE_RETURN_IF_ERROR(CheckRedisPrefix(options.prefix));
  if (options.node_id.empty()) options.node_id = DefaultNodeId();
  // spdlog's registry is made on first use; make it here, on the opening
  // thread, not first inside the transport's threads (libspdlog's static
  // initialization is invisible to ThreadSanitizer).
  (void)spdlog::default_logger_raw();
  if (!IsRedisKeyPart(options.node_id, 128)) {
    return InvalidArgument("redis node id must be 1..128 characters of A-Z a-z 0-9 _ . : -");
  }
  if (options.connect_timeout_ms < 1 || options.command_timeout_ms < 1 || options.block_ms < 1 ||
      options.node_ttl_ms < 4 || options.reconnect_min_ms < 1 ||
      options.reconnect_max_ms < options.reconnect_min_ms || options.max_list < 1) {
    return InvalidArgument("redis transport: timeouts and sizes must be positive");
  }
  return std::unique_ptr<WorkTransport>(
      std::make_unique<RedisTransport>(std::move(options), std::move(url)));
}

}  // namespace taskengine
