// Ember's one CAF type-ID block: every message type that crosses processes, registered once per
// actor system by ember::configure_actor_system (actors/actor_system.hpp). Adding a message type
// means adding it here; local-only types (those carrying shared pointers) are instead marked with
// CAF_ALLOW_UNSAFE_MESSAGE_TYPE next to their definition.
#pragma once

#include <caf/type_id.hpp>

#include "actors/admin_interface.hpp"
#include "actors/cluster_manager_interface.hpp"
#include "actors/fault_messages.hpp"
#include "actors/gateway_interface.hpp"
#include "actors/generation_messages.hpp"
#include "actors/gpu_executor_interface.hpp"
#include "actors/inference_messages.hpp"
#include "actors/load_report_messages.hpp"
#include "actors/loading_messages.hpp"
#include "actors/metrics_messages.hpp"
#include "actors/model_cache_interface.hpp"
#include "actors/model_messages.hpp"
#include "actors/node_report_messages.hpp"
#include "actors/node_router_interface.hpp"
#include "actors/pipeline_messages.hpp"
#include "actors/routing.hpp"
#include "actors/transfer_peer_interface.hpp"
#include "actors/transfer_progress_messages.hpp"
#include "actors/wire_inspect.hpp"
#include "actors/workflow_messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(ember_actors, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(ember_actors, (ember::model_key))
CAF_ADD_TYPE_ID(ember_actors, (ember::tensor_msg))
CAF_ADD_TYPE_ID(ember_actors, (ember::infer_request))
CAF_ADD_TYPE_ID(ember_actors, (ember::infer_reply))
CAF_ADD_TYPE_ID(ember_actors, (ember::blob_source))
CAF_ADD_TYPE_ID(ember_actors, (ember::load_replica))
CAF_ADD_TYPE_ID(ember_actors, (ember::replica_info))
CAF_ADD_TYPE_ID(ember_actors, (ember::blob_part))
CAF_ADD_TYPE_ID(ember_actors, (ember::load_stage))
CAF_ADD_TYPE_ID(ember_actors, (ember::pipeline_hop))
CAF_ADD_TYPE_ID(ember_actors, (ember::tensor_handoff))
CAF_ADD_TYPE_ID(ember_actors, (ember::stage_request))
CAF_ADD_TYPE_ID(ember_actors, (ember::device_report))
CAF_ADD_TYPE_ID(ember_actors, (ember::node_report))
CAF_ADD_TYPE_ID(ember_actors, (ember::model_state))
CAF_ADD_TYPE_ID(ember_actors, (ember::model_command))
CAF_ADD_TYPE_ID(ember_actors, (ember::admin_auth))
CAF_ADD_TYPE_ID(ember_actors, (ember::replica_ref))
CAF_ADD_TYPE_ID(ember_actors, (ember::routing_entry))
CAF_ADD_TYPE_ID(ember_actors, (ember::routing_update))
CAF_ADD_TYPE_ID(ember_actors, (ember::node_count))
CAF_ADD_TYPE_ID(ember_actors, (ember::model_load))
CAF_ADD_TYPE_ID(ember_actors, (ember::load_report))
CAF_ADD_TYPE_ID(ember_actors, (ember::executor_status))
CAF_ADD_TYPE_ID(ember_actors, (ember::cache_status))
CAF_ADD_TYPE_ID(ember_actors, (ember::metrics::SeriesSnapshot))
CAF_ADD_TYPE_ID(ember_actors, (ember::metrics::FamilySnapshot))
CAF_ADD_TYPE_ID(ember_actors, (ember::metrics::MetricsSnapshot))
CAF_ADD_TYPE_ID(ember_actors, (ember::distribute_request))
CAF_ADD_TYPE_ID(ember_actors, (ember::distribute_result))
CAF_ADD_TYPE_ID(ember_actors, (ember::chain_progress))
CAF_ADD_TYPE_ID(ember_actors, (ember::chain_upstream_request))
CAF_ADD_TYPE_ID(ember_actors, (ember::chain_splice))
CAF_ADD_TYPE_ID(ember_actors, (ember::node_router_actor))
CAF_ADD_TYPE_ID(ember_actors, (ember::gateway_actor))
CAF_ADD_TYPE_ID(ember_actors, (ember::cluster_manager_actor))
CAF_ADD_TYPE_ID(ember_actors, (ember::admin_actor))
// Answers that are lists (the console reads them from another process).
CAF_ADD_TYPE_ID(ember_actors, (std::vector<ember::node_report>))
CAF_ADD_TYPE_ID(ember_actors, (std::vector<ember::model_state>))
CAF_ADD_TYPE_ID(ember_actors, (std::vector<ember::model_key>))
CAF_ADD_TYPE_ID(ember_actors, (ember::hop_progress))
CAF_ADD_TYPE_ID(ember_actors, (std::vector<ember::hop_progress>))
CAF_ADD_TYPE_ID(ember_actors, (ember::fault_command))
CAF_ADD_TYPE_ID(ember_actors, (ember::slo_setting))
CAF_ADD_TYPE_ID(ember_actors, (ember::slo_command))
CAF_ADD_TYPE_ID(ember_actors, (ember::workflow_entry))
CAF_ADD_TYPE_ID(ember_actors, (ember::workflow_request))
// Text generation (generation_messages.hpp): a request, and the chunks that answer it.
CAF_ADD_TYPE_ID(ember_actors, (ember::generate_request))
CAF_ADD_TYPE_ID(ember_actors, (ember::generate_chunk))
// The members a node dials (node_report_messages.hpp).
CAF_ADD_TYPE_ID(ember_actors, (ember::peer_endpoint))
CAF_ADD_TYPE_ID(ember_actors, (std::vector<ember::peer_endpoint>))
CAF_END_TYPE_ID_BLOCK(ember_actors)
