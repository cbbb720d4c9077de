// The YAML config file of an Ember process. One file type serves every process kind: a manager
// reads `manager:` and `autoscale:`, a gateway `gateway:`, a node `node:`, `devices:`, `binding:` and
// `transfer:`; a process that plays several roles (a one-host cluster) reads several.
// deploy/ember.yaml shows every key with its default.
//
//   manager:   listen, data_listen, repository, node_timeout, heartbeat, replace_on_failure
//   gateway:   http, http_threads, max_body, request_timeout, cold_start_timeout, max_pending
//   node:      manager, data_listen, name, cache, repository, rejoin_interval, max_queue,
//              max_queued_per_model, max_queued_total
//   devices:   kind, count, memory, pcie_bandwidth, pageable_bandwidth, compute_threads, pcie_switch,
//              switch_bandwidth, links   (config/device_config.hpp)
//   binding:   mode, scheduler, eviction, group, heavy_factor, slo_factor, slo_deadline,
//              slo_percentile, workspace, window, repartition, alpha_period, seed
//   autoscale: enabled, interval, look_back, drain_timeout, chain_scale_up, peer_sources, placement
//              (the loop's and placement's), policy, min_replicas, max_replicas, target_ongoing_requests, headroom,
//              target_queue_latency, target_requests_per_minute, upscale_delay, downscale_delay,
//              idle_timeout, host_keep_alive, downscale_tolerance   (config/autoscale_config.hpp;
//              the defaults of every model, which its model.json may override)
//   security:  tls_certificate, tls_key, tls_key_passphrase_file, tls_ca (the control plane's mutual TLS),
//              ticket_key_file (tickets on the data plane)
//   transfer:  transport, chunk, socket_buffer, progress_interval, idle_timeout, stall_timeout,
//              slow_fraction, min_rate, lag, max_attempts, rack
//
// Pure data plus parsing; anyone may call it, on any thread. Parsing never throws and never touches
// the network or the repository directories (whether a directory exists or a host resolves is found
// out by the process that uses it). Every bad value is an invalid_argument Error naming the file and
// the key ("ember.yaml: manager.heartbeat: ..."); unknown keys, at the top level and inside each
// section, and keys given twice are errors too, so a typo never silently becomes a default. A
// cross-field rule names both keys. An empty document gives the defaults.
//
// Units: durations are written "250ms", "2s", "100us" (a bare number is microseconds) and held in
// microseconds (`_us`); sizes are written "16GiB", "64MiB" and held in bytes; endpoints are written
// "host:port" (base/host_port.hpp). Every duration must lie in 1ms..24h, so that converting it to
// nanoseconds or adding it to a clock never overflows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "config/autoscale_config.hpp"
#include "config/choices.hpp"
#include "config/device_config.hpp"
#include "base/host_port.hpp"
#include "base/status.hpp"

namespace ember {

/// `manager:` — the cluster manager: membership, model registry, placement.
struct ManagerConfig {
  /// Where the manager's CAF middleman listens for nodes, gateways and consoles. Default
  /// 127.0.0.1:7070 (one host only: multi-host clusters set an address the nodes can reach). Port 0
  /// picks an ephemeral port, which only in-process tests can discover. Changing it means every node
  /// and gateway must be pointed at the new address.
  HostPort listen{"127.0.0.1", 7070};
  /// Where the manager's blob server listens; it serves the model repository's bytes to nodes over
  /// the data plane. Default 127.0.0.1:0 (an ephemeral port, announced to nodes when they join).
  HostPort data_listen{"127.0.0.1", 0};
  /// Directory of the model repository the manager serves (one directory per model version). No
  /// default: required for a manager (check_role). Nodes fetch from it when no peer holds a model.
  std::string repository;
  /// A node that answers no heartbeat for this long is dropped: its replicas leave the routing table
  /// and are re-placed. Two heartbeats: its connection's (a dead or stopped process) and its router's
  /// answers to the manager's pings (a router that hangs while the process lives; such a node is
  /// taken back, with the replicas it reports, once it answers again). Microseconds; default 2s. Shorter detects hung
  /// nodes sooner but also drops nodes that merely stall (a host copying many GiB can be slow to answer); a dead
  /// process is noticed at once anyway, through its closed connection.
  uint64_t node_timeout_us = 2'000'000;
  /// Interval between heartbeats to each node. Microseconds; default 250ms; must be shorter than
  /// node_timeout (several heartbeats should fit in one timeout). Each costs one small message per
  /// node, so shorter intervals cost manager CPU linearly in the node count.
  uint64_t heartbeat_us = 250'000;
  /// Whether the replicas of a dropped node are re-placed on the surviving nodes. Default true. With
  /// false, the lost capacity stays lost until the autoscaler asks for more (requests for a model
  /// whose last replica died wait for a cold start).
  bool replace_on_failure = true;
  /// After the manager (re)starts, how long a gateway that still holds a routing table (from the
  /// manager's previous life) waits for its first table from this one. The nodes rejoin meanwhile
  /// (every node.rejoin_interval) and report their replicas, so the gateway keeps serving from its
  /// own table instead of taking an empty one. A gateway without a table is answered at once.
  /// Microseconds; default 3s; 0..60s. Set it above the nodes' rejoin_interval.
  uint64_t recovery_window_us = 3'000'000;
  /// A file holding the admin token the console's commands must carry (`ember console --token-file`);
  /// surrounding whitespace is ignored; it must not be empty. Empty (the default): no token, and the
  /// console may only read. Keep the file readable by the manager's user only.
  std::string admin_token_file;
  /// Whether the console's read-only commands (nodes, models, metrics) need no token. Default true.
  bool open_reads = true;
  /// A folder where the manager keeps what a person decided (explicit loads and unloads, the
  /// console's `scale` bounds, SLOs set at run time): each decision is on disk (fsync'd) before it is
  /// acknowledged, and a restarted manager comes back with them. Created if missing (mode 0700); a
  /// corrupt state, or one from a newer Ember, stops the manager from starting, naming the file.
  /// Empty (the default): kept in memory only, and a restart forgets them.
  std::string state_dir;
  /// etcd's client endpoints ("host:port", comma-separated in the YAML: "10.0.0.5:2379,10.0.0.6:2379"):
  /// several managers share the decisions there and elect one leader with a lease; the others stand
  /// by (they neither listen for nodes nor serve) and one takes over when the leader's lease ends.
  /// Empty (the default): one manager, its decisions in state_dir. Not with state_dir.
  std::vector<HostPort> etcd;
  /// The keys' prefix in etcd (the leader key "<prefix>/leader", the decisions "<prefix>/state"):
  /// one per cluster sharing an etcd. Default "/ember".
  std::string etcd_prefix = "/ember";
  /// The leader's lease: a leader that could not renew it for this long stops (its process exits),
  /// and a standby takes over once etcd lets the lease expire. Microseconds; default 5s; 2s..60s.
  uint64_t lease_ttl_us = 5'000'000;
};

/// `gateway:` — the HTTP (KServe v2) front end.
struct GatewayConfig {
  /// Where the HTTP server listens. Default 127.0.0.1:8000; 0.0.0.0:8000 serves every interface.
  HostPort http{"127.0.0.1", 8000};
  /// Threads of the HTTP server (parsing, JSON, socket I/O). Default 8; 1..1024. Inference itself
  /// runs on the nodes; more threads help only when request parsing is the bottleneck.
  uint32_t http_threads = 8;
  /// Connections accepted and waiting for a free HTTP thread (a thread serves one keep-alive
  /// connection at a time, for as long as the client keeps it). Beyond this a new connection is
  /// answered 503 with Retry-After at once and closed (overflow policy: reject newest, counted in
  /// ember_http_rejected_total). Connections; default 256; 1..65536. Each waiting connection holds
  /// a file descriptor and its unread request in kernel memory; a longer queue rides out bursts of
  /// new connections, at the cost of their wait behind busy ones (a waiting connection is served
  /// only when a served one closes).
  uint32_t http_queue = 256;
  /// Where the KServe v2 gRPC service listens (inference.GRPCInferenceService, Triton's layout, and
  /// the standard health service). Unset (the default): no gRPC. Triton's port is 8001. Messages
  /// larger than max_body are refused (RESOURCE_EXHAUSTED).
  std::optional<HostPort> grpc;
  /// Most threads the gRPC server runs calls on at once (a thread waits for its inference's answer,
  /// as an HTTP thread does, mostly asleep). Default 128; 1..4096. A call beyond them is refused at
  /// once with RESOURCE_EXHAUSTED ("Server Threadpool Exhausted", gRPC's own refusal), which
  /// clients may retry: set it at least to the concurrency clients use.
  uint32_t grpc_threads = 128;
  /// Largest request body accepted; larger bodies are refused (413). Bytes; default
  /// 64 MiB; 1 KiB..1 GiB. The gateway may hold max_pending bodies per model in memory, so this
  /// times max_pending bounds its memory for held requests.
  uint64_t max_body_bytes = 64ull << 20;
  /// A request not answered within this gets 504. Microseconds; default 60s. Covers queueing on the
  /// node, a cold start and the inference.
  uint64_t request_timeout_us = 60'000'000;
  /// How long a request for a model with no warm replica is held while the manager starts one;
  /// afterwards it gets 503. Microseconds; default 30s; at most request_timeout. Shorter fails fast
  /// for clients that retry elsewhere; longer rides out loading big models from disk.
  uint64_t cold_start_timeout_us = 30'000'000;
  /// Bound on requests held per model while waiting for a cold start; beyond it requests get 503 at
  /// once (overflow policy: reject newest, counted in metrics). Default 1024; 1..1000000.
  uint32_t max_pending = 1024;
  /// The manager a standalone gateway (`ember gateway`) subscribes to (its manager.listen). Required
  /// there; a gateway inside `ember manager` or `ember serve` uses its own process's manager.
  /// Several, comma-separated ("a:7070,b:7070": managers sharing etcd, manager.etcd): the first, and
  /// the others in standby_managers; whichever answers leads (a standby does not listen).
  std::optional<HostPort> manager;
  std::vector<HostPort> standby_managers;
  /// A standalone gateway that lost its manager tries to reach it again this often, serving warm
  /// requests from its last routing table meanwhile. Microseconds; default 1s; 10ms..60s.
  uint64_t reconnect_interval_us = 1'000'000;
  /// A file of API bearer tokens, one per line (blank lines and '#' comments skipped), read at
  /// start. When set, every HTTP and gRPC call except the health checks (/v2/health/live and
  /// /ready, gRPC ServerLive, ServerReady and the standard health service) must carry
  /// `Authorization: Bearer TOKEN` (gRPC: the `authorization` metadata): without one, or with a
  /// malformed one, 401 / UNAUTHENTICATED; with a token not in the file, 403 / PERMISSION_DENIED.
  /// Words after a token give its scopes and rates (base/token_file.hpp's ApiToken: "TOKEN admin",
  /// "TOKEN infer=mlp rate=20 concurrent=8 name=tenant-a"); changing what the cluster serves needs
  /// the repository scope (load, unload, distribute, evict; 403 / PERMISSION_DENIED without it),
  /// and a call past its token's rates is 429 / RESOURCE_EXHAUSTED (api_access.hpp). Empty (the
  /// default): the API, those changes included, is open to whoever reaches its address (the
  /// gateway says so at start when that is not loopback).
  std::string api_tokens_file;
  /// Also serve GET /metrics alone here, without bearer tokens, for a Prometheus inside the cluster
  /// (Triton's metrics port is 8002). Unset (the default): /metrics only on the API's port.
  std::optional<HostPort> metrics;
  /// TLS on the API (HTTP and gRPC; not the metrics port): PEM files of the server's certificate
  /// chain and its private key, both or neither; the key's passphrase (a file, first line) when it
  /// is encrypted. Every file is checked at start (a wrong path, passphrase or a key of another
  /// certificate stops the process, naming the file). Empty (the default): plain HTTP and gRPC.
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_key_passphrase_file;
  /// With TLS: clients must present a certificate this CA (PEM) signed (mutual TLS). Empty: none.
  std::string tls_client_ca;
};

/// `node:` — one host's node router, executors and model cache. Its devices are `devices:`.
struct NodeConfig {
  /// The manager to join (its `manager.listen`). No default: required for a node (check_role).
  /// Several, comma-separated, as gateway.manager: tried in turn until one answers (the leader).
  std::optional<HostPort> manager;
  std::vector<HostPort> standby_managers;
  /// Where this node's router accepts direct CAF connections: standalone gateways dial it, so that
  /// their requests reach the node without passing through the manager's process (and go on while
  /// the manager is away). Default 127.0.0.1:0 (ephemeral, announced to the manager when joining).
  /// Multi-host clusters set an address the gateways can reach.
  HostPort listen{"127.0.0.1", 0};
  /// Where this node's blob server listens; peers pull model bytes from it (chains, peer sourcing).
  /// Default 127.0.0.1:0 (ephemeral, announced to the manager when joining). Multi-host clusters
  /// set an address other hosts can reach.
  HostPort data_listen{"127.0.0.1", 0};
  /// The node's name in the cluster: logs, metrics (`node` label), the console. Empty (the default)
  /// means default_node_name(), "<hostname>:<pid>". 1..255 printable ASCII characters, no spaces.
  /// Two live nodes must not share a name.
  std::string name;
  /// Cap on the host memory the model cache uses for model bytes (pinned where possible). Bytes;
  /// default 16 GiB; at least 1 MiB. Beyond it, the least recently used models not resident on any
  /// device are evicted. Larger caches keep more models warm ("embers") at the cost of host RAM.
  uint64_t cache_bytes = 16ull << 30;
  /// Optional local model repository directory, read before asking peers or the manager. Empty (the
  /// default) means none.
  std::string repository;
  /// Time between attempts to reach the manager, while joining and after losing it. Microseconds;
  /// default 1s. Shorter rejoins sooner after a manager restart, at the cost of connection attempts.
  uint64_t rejoin_interval_us = 1'000'000;
  /// Bound on inference requests waiting on each executor (one per device) of this node; beyond it
  /// the executor refuses the newest (overflow policy: reject newest; the client gets 503, counted
  /// in ember_rejected_requests_total) and the gateway may retry another replica. With
  /// binding.mode pinned, where a model's requests go straight to the device it is bound to, this
  /// is the node's request bound, shared by the models bound to that device; with late binding the
  /// router hands each device one request at a time and max_queued_per_model and max_queued_total
  /// bound the waiting instead. Default 1024; 1..1000000. Larger rides out longer bursts at the cost
  /// of queueing delay and of holding the waiting requests' inputs in host memory.
  uint32_t max_queue = 1024;
  /// Late binding: bound on requests of one model waiting in the router's SLO queue
  /// (placement/rrc_queue.hpp) for a device; beyond it the router refuses the newest (overflow
  /// policy: reject newest; 503, counted in ember_rejected_requests_total). Default 256;
  /// 1..1000000, at most max_queued_total. Larger means fewer 503s under a burst of one model but
  /// longer queueing before one; the router holds each waiting request's inputs in memory.
  uint32_t max_queued_per_model = 256;
  /// Late binding: bound on requests of all models waiting in the router's SLO queue; beyond it the
  /// router refuses the newest as above. Default 4096; 1..1000000. With the largest request body
  /// (gateway.max_body), it bounds the host memory the node's waiting requests take.
  uint32_t max_queued_total = 4096;
  /// Accept fault commands (kill an actor, drop/delay/duplicate the router's messages, fail
  /// allocations, fault a kernel) from the console and tests: `ember node --allow-faults` or
  /// node.allow_faults. Default false; never on a node that serves real traffic (anyone who can
  /// reach the node's listen address could inject them).
  bool allow_faults = false;
};

/// `transfer:` — the data plane and chained multicast of model bytes (read by managers and nodes).
struct TransferConfig {
  /// tcp (the default; kernel sockets) or ucx (UCX active messages with rendezvous). Ember runs UCX
  /// in its peer-failure mode, in which UCX 1.13 chooses tcp lanes only (transport/ucx_worker.hpp
  /// says why), so ucx uses neither shared memory nor RDMA today. Every node and the manager of a
  /// cluster must use the same transport.
  TransportKind transport = TransportKind::tcp;
  /// Payload bytes per data frame. Default 1 MiB (measured: transport/server_options.hpp);
  /// 64 KiB..64 MiB. Larger delays the first forwarded chunk of each hop and coarsens resume.
  uint64_t chunk_bytes = 1ull << 20;
  /// SO_SNDBUF/SO_RCVBUF of data-plane sockets: the in-flight window of one hop. Default 4 MiB;
  /// 64 KiB..256 MiB. Each transfer holds up to twice this in kernel memory per side.
  uint64_t socket_buffer_bytes = 4ull << 20;
  /// How often a receiving hop reports its verified offset to the manager. Microseconds; default
  /// 250ms. Shorter finds stalls sooner at one small message per hop per interval.
  uint64_t progress_interval_us = 250'000;
  /// A hop whose upstream sends nothing for this long gives that upstream up and asks the manager
  /// for another. Microseconds; default 5s.
  uint64_t idle_timeout_us = 5'000'000;
  /// The manager splices out a hop whose offset has not moved for this long while its upstream
  /// holds more (or that moves slower than slow_fraction of its upstream over this window).
  /// Microseconds; default 2s.
  uint64_t stall_timeout_us = 2'000'000;
  /// See stall_timeout. Default 0.25; 0 disables the slow-hop rule (only stalls count); below 1.
  double slow_fraction = 0.25;
  /// A hop (with a hop waiting on it) that receives slower than this over stall_timeout is spliced
  /// out too, whatever feeds it. Bytes per second; default 0 (off). Set it to a fraction of the
  /// slowest link's rate: a hop behind a congested link should not hold up the rest of the chain.
  uint64_t min_rate_bytes_per_s = 0;
  /// A slow hop is spliced out only when it lags its upstream by at least this many bytes. Default
  /// 64 MiB; at least one chunk.
  uint64_t lag_bytes = 64ull << 20;
  /// Fetch attempts (first plus resumes) of one hop before it gives up. Default 16; 1..1000.
  uint32_t max_attempts = 16;
  /// This node's rack (racks order chains so each inter-rack link is crossed once). Default "" (unknown).
  std::string rack;

  // Fault seams for tests and drills: set only from the command line (`ember node --fault-...`),
  // never from the file. 0 = off.
  /// The node's blob server flips one bit of its Nth data frame (1-based, counted over its life),
  /// after computing the frame's checksum: the receiver must detect it and fetch the chunk again.
  uint64_t fault_corrupt_frame = 0;
  /// The node's multicast hops receive at most this many bytes per second (a slow peer).
  uint64_t fault_receive_bytes_per_s = 0;
};

/// `binding:` — how a node binds models to its devices (late binding, Torpor; read by nodes).
struct BindingConfig {
  /// "late" (the default): every model a node holds lives in host memory and is swapped onto the
  /// device the router picks for each request, evicting others under pressure, so a node serves
  /// more models than its devices hold. "pinned": a model is bound to one device when loaded and
  /// stays there; a model that fits nowhere is refused (the baseline of bench/density).
  BindingMode mode = BindingMode::late;
  /// Device choice per request: "torpor" (the default; Algorithm 1, interference-aware) or
  /// "random" (the Torpor-Random ablation: a random idle device, host swaps only).
  SwapScheduler scheduler = SwapScheduler::torpor;
  /// Victims under memory pressure: "torpor" (the default; duplicates, light LRU, heavy LRU) or
  /// "lru" (plain least recently used).
  EvictionRule eviction = EvictionRule::torpor;
  /// Bytes per swap-in copy group. 0 (the default) = measured at executor start: the elbow of the
  /// device's host-to-device throughput (the smallest size reaching 90% of the best; ~2 MB on
  /// PCIe 3). 64 KiB..1 GiB otherwise.
  uint64_t group_bytes = 0;
  /// A model is heavy when swapping it in slows its inference by more than this factor, measured
  /// when a node registers the model. Default 1.3; 1..100.
  double heavy_factor = 1.3;
  /// Per-model latency target: a request meets its SLO when answered within slo_factor times the
  /// model's warm latency (measured at registration), or within slo_deadline when that is set.
  /// A model.json that declares serving.slo_deadline overrides both. Default factor 2 (1..1000),
  /// deadline 0 (use the factor; else 1ms..24h).
  double slo_factor = 2.0;
  uint64_t slo_deadline_us = 0;
  /// Share of requests that must meet the deadline (Torpor's percentile). Default 0.98; (0, 1).
  double slo_percentile = 0.98;
  /// Device memory each executor keeps out of its model pool for activations and scratch space.
  /// Bytes; default 0 = an eighth of the device but at least 256 MiB, and at most half the device.
  /// An executor refuses to start when it leaves no room for models.
  uint64_t workspace_bytes = 0;
  /// RRC queue (placement/rrc_queue.hpp): sliding window, repartition and alpha periods.
  /// Microseconds; defaults 10s, 1s, 10s; each 1ms..24h, repartition <= window.
  uint64_t window_us = 10'000'000;
  uint64_t repartition_us = 1'000'000;
  uint64_t alpha_period_us = 10'000'000;
  /// Seed of the random scheduler (reproducible runs). Default 1.
  uint64_t seed = 1;
  /// Requests of a model resident on a busy device that may queue there behind the running one
  /// (plain runs only: swaps and evictions still wait for an idle device). Default 1; 0 gives
  /// Torpor's one request per device; at most 16. Hides the router's round trip between requests.
  uint32_t run_ahead = 1;
  /// Runs of different resident models that one device executes at once, each on its own stream
  /// (StreamBox's functions as streams; actors/node/engine/lanes.hpp). The router admits a run
  /// beside the running ones while the device's workspace holds the activations they measured.
  /// Default 4; 1 gives one request at a time per device (Torpor); at most 32.
  uint32_t streams = 4;
  /// PCIe sharing (StreamBox): swap-ins from host memory go through the device's I/O scheduler, cut
  /// into blocks of binding.group, this many blocks a batch, round robin between concurrent copies
  /// (gpu/io_scheduler.hpp). Default 6; 0 issues each swap's copies at once (the first comer
  /// holds the copy engine); at most 64.
  uint32_t io_batch = 6;
  /// Page-locked host memory per device that copies from and to pageable memory (request inputs,
  /// answers, workflow values restored from host memory) are staged through
  /// (gpu/pinned_staging.hpp): a copy engine moves pageable memory at a fraction of its pinned rate.
  /// Default 16 MiB; 0 copies pageable memory directly; at most 1 GiB.
  uint64_t staging_bytes = 16ull << 20;
  /// Warm requests from a gateway in the same process (`ember serve`) run on the front end's own
  /// thread when their model is resident on an idle device (actors/node/inline_runs.hpp): no actor
  /// hop, no thread woken. Default true; false sends every request through the router.
  bool inline_runs = true;
  /// Bursts (AsyFunc, issue 19; README "Bursts and shadow functions"). Each needs the model's
  /// profile (`ember model profile`), and models without one are served as before.
  /// bodies: "free" (the default: any idle device may take a copy of a model when its requests
  /// wait) or "model_level" (model-level scaling, AsyFunc's Algorithm 1: the copies a model may
  /// have follow its rate against their capacity at the SLO, α 0.8 and β 0.6, once a
  /// scaling_period).
  BodyScalingMode bodies = BodyScalingMode::free;
  /// Layer-level scaling (Algorithm 2): when a model's rate over burst_window exceeds what its
  /// copies carry, an idle device takes a Shadow of the layers that need compute most, which shares
  /// the batches of one copy, until the rate falls. Default false.
  bool shadows = false;
  /// Adaptive batching (Algorithm 3): a batching model's free device waits for one more request
  /// while the oldest would still meet its deadline, by the profile's latency of each batch size,
  /// instead of preferred_batch and max_queue_delay. Default false.
  bool adaptive_batching = false;
  /// Defaults 100 ms and 1 s; each 1ms..24h.
  uint64_t burst_window_us = 100'000;
  uint64_t scaling_period_us = 1'000'000;
};

/// `generation:` — how a node's generative models decode (docs/design/generation.md; read by
/// nodes, mapped onto each model's GenerationLoop: actors/node/engine/generation_loop.hpp). Every
/// generative model on a device gets these bounds; each has its own KV cache within them.
struct GenerationConfig {
  /// Sequences decoding at once per model (vLLM's max_num_seqs). Default 256; 1..65536.
  uint32_t max_num_seqs = 256;
  /// Tokens fed in one step, all sequences together (vLLM's max_num_batched_tokens): larger steps
  /// prefill faster and delay each decode step longer. Default 2048; max_num_seqs..1048576.
  uint32_t max_num_batched_tokens = 2048;
  /// Requests waiting per model beyond the running ones; past it a new one is refused (503).
  /// Default 1024; 1..1000000.
  uint32_t max_waiting = 1024;
  /// Device memory a model's KV cache may hold at once: a share of the device's model pool
  /// ("50%", the default: half for tokens, half for the weights late binding swaps through) or a
  /// size ("2GiB"; 0 < size). kv_cache_bytes 0 means the share kv_cache_fraction in (0, 1].
  double kv_cache_fraction = 0.5;
  uint64_t kv_cache_bytes = 0;
  /// Host memory per model for KV blocks moved out of the device when the blocks run short (vLLM's
  /// swap_space). Default 4 GiB; 0: a preempted sequence is always recomputed.
  uint64_t kv_swap_space = 4ull << 30;
};

/// `security:` — the control plane (CAF: manager, nodes, gateways, consoles). Read by every process
/// kind that joins a cluster; the API's TLS is gateway.tls_*, separately.
struct SecurityConfig {
  /// Mutual TLS on every control-plane connection: this process's certificate chain and private
  /// key (PEM; `ember certs issue`), the key's passphrase (a file, first line) when it is
  /// encrypted, and the cluster CA (PEM) that must have signed every peer's certificate. All of
  /// certificate, key and CA, or none: a process with TLS neither accepts nor makes plain
  /// connections, and one without refuses nothing, so a cluster turns it on everywhere at once.
  /// Every file is checked at start (a wrong path, passphrase, a key of another certificate, a
  /// certificate the CA did not sign stops the process, naming the file). Any certificate the CA
  /// signed is a member: roles are not told apart by certificate (CAF cannot show the peer's), so
  /// the console's changes also need manager.admin_token_file's token, and the CA should sign
  /// nothing but cluster members (the API's client certificates come from another CA).
  std::string tls_certificate;
  std::string tls_key;
  std::string tls_key_passphrase_file;
  std::string tls_ca;
  /// Tickets on the data plane (transport/ticket.hpp): a file holding the cluster's ticket key (at
  /// least 32 characters: `openssl rand -hex 32`), the same file on the manager and every node.
  /// Set: every fetch of model bytes or of a pipeline stage's tensors must carry a ticket a member
  /// issued with it (the manager for each source it gives a node; a stage for its handoff), for
  /// that blob and receiver and a time window; a blob server refuses any other fetch before it sends
  /// a byte. Needs tls_* (tickets travel in control-plane messages). Empty (the default): the data
  /// plane serves whoever reaches it.
  std::string ticket_key_file;
  /// How the data plane's bytes travel: "tickets" (the default: in the clear, with tickets when
  /// ticket_key_file is set) or "tls" (encrypted too, both ends authenticated by the cluster CA with
  /// the certificates above; needs tls_* and transfer.transport tcp). TLS costs CPU on every hop
  /// of a chain (each hop decrypts and encrypts again): README, Security, has the measurement.
  bool data_plane_tls = false;
  /// Whom a ticket opens its blob to: "name" (the default: the receiver the ticket names, as the
  /// request claims it) or "certificate" (the receiver whose certificate's common name is the name
  /// the ticket holds: each member its own certificate, `ember certs issue --name NODE` with the
  /// node's --name; a node whose certificate names another refuses to start). Needs
  /// ticket_key_file and data_plane: tls (the name comes from the TLS handshake).
  bool ticket_names_certificate = false;

  bool tls() const { return !tls_certificate.empty(); }
};

struct ClusterConfig {
  ManagerConfig manager;
  GatewayConfig gateway;
  NodeConfig node;
  TransferConfig transfer;
  BindingConfig binding;
  GenerationConfig generation;
  SecurityConfig security;
  AutoscaleConfig autoscale;
  /// The loop's settings, from the same `autoscale:` section (enabled, interval, look_back,
  /// drain_timeout).
  AutoscalerSettings autoscaler;
  /// Top-level `devices:`, as parse_devices_config reads it; used by node processes.
  DevicesConfig devices;
  /// Whether the file had a `manager:`, `gateway:`, `node:` key (even with nothing under it): that
  /// is, which processes it configures. validate() checks listening endpoints for collisions only
  /// between present sections, so a node-only file is not refused because its node.data_listen
  /// shares a port with the default manager.listen. A config built in code has all three.
  bool has_manager = true;
  bool has_gateway = true;
  bool has_node = true;
};

/// The kinds of Ember process; each requires a few keys that have no default.
enum class ProcessRole : uint8_t { manager, gateway, node };

std::string_view to_string(ProcessRole role);

/// Ranges and cross-field rules of every section (the `devices:` ones included):
///   - manager.heartbeat < manager.node_timeout; gateway.cold_start_timeout <= gateway.request_timeout;
///   - node.manager, when set, has a port other than 0 and differs from node.data_listen;
///   - listening endpoints with a fixed port (manager.listen, manager.data_listen, gateway.http,
///     node.data_listen) of the sections present do not collide: same port on the same host, 0.0.0.0
///     counting as every host. (One file may configure several processes of a host; endpoints on
///     different hosts are told apart only by host spelling, so write the hosts out in multi-host
///     files, or give each host its own file.)
/// `source` prefixes messages.
Status validate(const ClusterConfig& config, std::string_view source);

/// The keys without a default that `role` needs: manager.repository for a manager, node.manager for a
/// node; nothing for a gateway. Called by each process after loading; `source` prefixes messages.
Status check_role(const ClusterConfig& config, ProcessRole role, std::string_view source);

/// Parses and validates a whole document held in `yaml`. `source` is the file name used in messages.
Result<ClusterConfig> parse_cluster_config(std::string_view yaml, std::string_view source);

/// Reads `path` (not_found if missing, io_error if unreadable, invalid_argument if above 1 MiB,
/// which no config file is) and parses it with the path as the source.
Result<ClusterConfig> load_cluster_config(const std::string& path);

/// "<hostname>:<pid>", the node name when `node.name` is not given.
std::string default_node_name();

}  // namespace ember
