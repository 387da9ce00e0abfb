// The built-in node types, one family per file under nodes/types/.
#include "nodes/types/type_kit.h"

namespace mls::nodes {

void register_builtin_nodes(NodeCatalogue& catalogue) {
  register_data_nodes(catalogue);
  register_dense_nodes(catalogue);
  register_activation_nodes(catalogue);
  register_conv_nodes(catalogue);
  register_norm_nodes(catalogue);
  register_merge_nodes(catalogue);
  register_sequence_nodes(catalogue);
  register_position_nodes(catalogue);
  register_loss_nodes(catalogue);
}

}  // namespace mls::nodes
