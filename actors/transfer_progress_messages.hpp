// The progress of multicast chains in flight, as the console's `transfers` shows it: the manager's
// chain relay (actors/cluster/chain_relay.hpp) answers transfers_atom with one hop_progress per hop,
// to the admin actor and on to the console. The chain's own conversation (controller and hops) is
// actors/transfer_peer_interface.hpp.
//
// Pure data with CAF `inspect`, registered in actors/type_ids.hpp; anyone may build and read it on
// any thread.
#pragma once

#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <string>

namespace ember {

/// One hop of a multicast chain in flight, as the console's `transfers` shows it.
struct hop_progress {
  uint64_t transfer_id = 0;
  std::string model;
  std::string hop;       // the receiving node
  std::string upstream;  // the node or source it pulls from
  uint64_t offset = 0;   // bytes it verified so far
  uint64_t blob_bytes = 0;
  std::string state;  // receiving, done, failed, spliced_out
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, hop_progress& x) {
  return f(caf::meta::type_name("hop_progress"), x.transfer_id, x.model, x.hop, x.upstream, x.offset, x.blob_bytes,
           x.state);
}

}  // namespace ember
