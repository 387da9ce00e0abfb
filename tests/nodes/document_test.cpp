#include <sys/stat.h>
#include <unistd.h>

#include "nodes/document.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace mls;
using namespace mls::nodes;
using ordered = nlohmann::ordered_json;

namespace {

const std::string kExample =
    std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The example as editable JSON, so each error test breaks exactly one thing.
ordered example_json() {
  return ordered::parse(read_file(kExample));
}

std::string parse_error(const ordered& j) {
  Result<Document> doc = parse_document(j.dump(2), "P.mls");
  REQUIRE_FALSE(doc);
  return doc.error().message;
}

std::vector<std::string> ids_in_order(const Document& doc) {
  std::vector<std::string> ids;
  for (size_t i : topological_order(doc)) ids.push_back(doc.nodes[i].id);
  return ids;
}

}  // namespace

TEST_CASE("the Fashion-MNIST example loads with its nodes, links and settings", "[nodes]") {
  Result<Document> doc = load_document(kExample);
  if (!doc) FAIL(doc.error().message);
  CHECK(doc->format_version == 1);
  CHECK(doc->name == "Fashion-MNIST MLP");
  CHECK(doc->nodes.size() == 9);
  CHECK(doc->links.size() == 8);
  CHECK(doc->warnings.empty());
  CHECK(doc->dataset.source == "fashion-mnist");
  CHECK(doc->dataset.path == "/usr/share/datasets/fashion-mnist");
  CHECK(doc->training.epochs == 10);
  CHECK(doc->training.schedule.type == "cosine");
  CHECK(doc->training.batch_size == 128);
  CHECK(doc->training.seed == 42);
  CHECK(doc->training.device == "cpu");
  CHECK(doc->training.mode == ExecMode::Static);
  CHECK(doc->training.optimizer.type == OptimizerType::Sgd);
  CHECK(doc->training.optimizer.lr == 0.05);
  CHECK(doc->training.optimizer.momentum == 0.9);

  const NodeDoc& fc1 = doc->nodes[*find_node(*doc, "fc1")];
  CHECK(fc1.type == "mls.linear");
  CHECK(fc1.params ==
        nlohmann::json{
            {"out_features", 256}, {"bias", true}, {"init", "kaiming_uniform"}, {"frozen", false}});
  const LinkDoc* logits = find_input_link(*doc, "loss", "logits");
  REQUIRE(logits != nullptr);
  CHECK(logits->from_node == "fc3");
  CHECK(logits->from_port == "out");
  CHECK(doc->nodes[*find_loss_node(*doc)].id == "loss");
  CHECK(doc->layout.at("fc1").at("x") == 400);
  CHECK(doc->notebook.present);
  CHECK(doc->notebook.cells.empty());

  std::vector<std::string> order = ids_in_order(*doc);
  CHECK(order == std::vector<std::string>{"image", "flat", "fc1", "relu1", "fc2", "relu2", "fc3",
                                          "label", "loss"});
  CHECK(check_graph(*doc, kExample));
}

TEST_CASE("defaults apply to the sections a file leaves out", "[nodes]") {
  ordered j = example_json();
  j.erase("training");
  j.erase("dataset");
  j.erase("layout");
  j.erase("notebook");
  Result<Document> doc = parse_document(j.dump(), "P.mls");
  REQUIRE(doc);
  CHECK(doc->training == TrainingSpec{});
  CHECK(doc->training.epochs == 5);
  CHECK(doc->training.schedule.type == "constant");
  CHECK(doc->training.batch_size == 128);
  CHECK(doc->training.seed == 0);
  CHECK(doc->training.optimizer.lr == 0.01);
  CHECK(doc->training.optimizer.momentum == 0.0);
  CHECK(doc->dataset.path == "/usr/share/datasets/fashion-mnist");
  CHECK_FALSE(doc->notebook.present);

  j["training"] = {{"optimizer", {{"type", "adam"}}}, {"mode", "eager"}};
  j["dataset"] = {{"source", "mnist"}, {"path", "/data/mnist"}, {"limit", 1000}};
  Result<Document> adam = parse_document(j.dump(), "P.mls");
  REQUIRE(adam);
  CHECK(adam->training.optimizer.type == OptimizerType::Adam);
  CHECK(adam->training.optimizer.lr == 0.001);
  CHECK(adam->training.optimizer.beta2 == 0.999);
  CHECK(adam->training.optimizer.eps == 1e-8);
  CHECK(adam->training.mode == ExecMode::Eager);
  CHECK(adam->dataset.limit == 1000);
  CHECK(adam->dataset.test_limit == 0);
}

TEST_CASE("topological order keeps file order between independent nodes", "[nodes]") {
  // Nodes listed backwards still come out sources first; the two sources keep file order.
  ordered j = example_json();
  ordered& nodes = j["model"]["nodes"];
  std::reverse(nodes.begin(), nodes.end());
  Result<Document> doc = parse_document(j.dump(), "P.mls");
  REQUIRE(doc);
  CHECK(ids_in_order(*doc) == std::vector<std::string>{"label", "image", "flat", "fc1", "relu1",
                                                       "fc2", "relu2", "fc3", "loss"});
}

TEST_CASE("save then load gives the same document", "[nodes]") {
  Result<Document> doc = load_document(kExample);
  REQUIRE(doc);
  // The example is written in the saved form, so saving it changes nothing.
  CHECK(ordered::parse(serialize_document(*doc)) == example_json());

  doc->training.optimizer.type = OptimizerType::Adam;
  doc->training.optimizer.lr = 3e-4;
  doc->training.optimizer.weight_decay = 0.01;
  doc->dataset.test_limit = 500;
  doc->notebook.cells = {{.id = "c1", .source = "print(1)"}};
  doc->layout["ghost"] = {{"x", 1}, {"y", 2}};

  const auto dir = std::filesystem::temp_directory_path() / "mls_nodes_roundtrip";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "copy.mls").string();
  Result<void> saved = save_document(*doc, path);
  if (!saved) FAIL(saved.error().message);
  Result<Document> again = load_document(path);
  if (!again) FAIL(again.error().message);
  CHECK(*again == *doc);
  CHECK(again->training.optimizer.lr == 3e-4);
  CHECK(again->training.optimizer.weight_decay == 0.01);
  // Stable: a second save writes the same bytes.
  const std::string first = read_file(path);
  REQUIRE(save_document(*again, path));
  CHECK(read_file(path) == first);
  CHECK(first.rfind("{\n  \"format_version\": 1,\n", 0) == 0);  // 2-space indent, first key
  // Only the saved file is left in the directory (the temporary was renamed away).
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a node's device placement is read, checked and saved", "[nodes]") {
  ordered j = example_json();
  j["model"]["nodes"][2]["device"] = "cpu";  // fc1 on the host
  Result<Document> doc = parse_document(j.dump(2), "P.mls");
  REQUIRE(doc);
  CHECK(doc->nodes[2].device == "cpu");
  CHECK(doc->nodes[3].device.empty());
  const ordered saved = ordered::parse(serialize_document(*doc));
  CHECK(saved["model"]["nodes"][2]["device"] == "cpu");
  CHECK_FALSE(saved["model"]["nodes"][3].contains("device"));  // absent: the project's device
  j["model"]["nodes"][2]["device"] = "cuda";
  CHECK_THAT(parse_error(j), Catch::StartsWith("P.mls: /model/nodes/2/device: a node's device is \"cpu\""));
}

TEST_CASE("a failed save names the path and leaves nothing behind", "[nodes]") {
  Result<Document> doc = load_document(kExample);
  REQUIRE(doc);
  const auto dir = std::filesystem::temp_directory_path() / "mls_nodes_no_such_dir";
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "x.mls").string();
  Result<void> saved = save_document(*doc, path);
  REQUIRE_FALSE(saved);
  CHECK_THAT(saved.error().message, Catch::StartsWith("cannot save " + path + ": "));
  CHECK_THAT(saved.error().message, Catch::Contains("No such file or directory"));
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("a save over a directory is refused and leaves nothing beside it", "[nodes]") {
  Result<Document> doc = load_document(kExample);
  REQUIRE(doc);
  // The target is a non-empty directory: only a regular file is ever replaced (even for
  // root, unlike a read-only directory), and no temporary file is left behind.
  const auto dir = std::filesystem::temp_directory_path() / "mls_nodes_rename_fails";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "p.mls");
  std::ofstream(dir / "p.mls" / "keep.txt") << "keep";
  const std::string path = (dir / "p.mls").string();
  Result<void> saved = save_document(*doc, path);
  REQUIRE_FALSE(saved);
  CHECK(saved.error().message == "cannot save " + path + ": " + path +
                                     " is a directory, not a regular file; only a regular file is replaced");
  CHECK(std::distance(std::filesystem::directory_iterator(dir),
                      std::filesystem::directory_iterator()) == 1);
  CHECK(read_file((dir / "p.mls" / "keep.txt").string()) == "keep");
  std::filesystem::remove_all(dir);
}

TEST_CASE("a renamed node type migrates on load and warns", "[nodes]") {
  ordered j = example_json();
  j["model"]["nodes"][2]["type"] = "mls.dense";
  Result<Document> doc = parse_document(j.dump(), "old.mls");
  REQUIRE(doc);
  CHECK(doc->nodes[2].type == "mls.linear");
  REQUIRE(doc->warnings.size() == 1);
  CHECK(doc->warnings[0] ==
        "old.mls: /model/nodes/2/type: node type 'mls.dense' is now 'mls.linear'; saving "
        "writes the new name");
  CHECK(serialize_document(*doc).find("mls.dense") == std::string::npos);
}

TEST_CASE("invalid JSON reports the line and column", "[nodes]") {
  const std::string text =
      "{\n"
      "  \"format_version\": 1,\n"
      "  \"name\": \"x\"\n"
      "  \"model\": {}\n"
      "}\n";
  Result<Document> doc = parse_document(text, "P.mls");
  REQUIRE_FALSE(doc);
  // The column is that of the last character of the offending token ("model").
  CHECK_THAT(doc.error().message, Catch::StartsWith("P.mls:4:9: invalid JSON: "));
  CHECK_THAT(doc.error().message, Catch::Contains("expected '}'"));

  Result<Document> empty = parse_document("", "E.mls");
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.error().message, Catch::StartsWith("E.mls:1:1: invalid JSON: "));

  Result<Document> cut = parse_document("{\n  \"a\": [1,\n", "C.mls");
  REQUIRE_FALSE(cut);
  CHECK_THAT(cut.error().message, Catch::StartsWith("C.mls:3:1: invalid JSON: "));
}

TEST_CASE("the format version is checked", "[nodes]") {
  ordered j = example_json();
  j["format_version"] = 7;
  CHECK(parse_error(j) == "P.mls: format_version 7 is newer than this mlstudio supports (1)");
  j.erase("format_version");
  CHECK(parse_error(j) == "P.mls: missing format_version (is this an mlstudio project?)");
  j["format_version"] = "1";
  CHECK(parse_error(j) == "P.mls: /format_version: must be an integer");
  CHECK(parse_error(ordered::array()) ==
        "P.mls: expected a JSON object at the top level (is this an mlstudio project?)");
}

TEST_CASE("node errors name the node and its JSON path", "[nodes]") {
  ordered j = example_json();
  j["model"]["nodes"][3]["type"] = "mls.foo";
  CHECK(parse_error(j) == "P.mls: /model/nodes/3/type: unknown node type 'mls.foo'");

  j = example_json();
  j["model"]["nodes"][4]["id"] = "fc1";
  CHECK(parse_error(j) ==
        "P.mls: /model/nodes/4/id: duplicate node id 'fc1' (first at /model/nodes/2)");

  j = example_json();
  j["model"]["nodes"][4]["id"] = "fc 2";
  CHECK_THAT(parse_error(j), Catch::StartsWith("P.mls: /model/nodes/4/id: node id 'fc 2' must"));

  j = example_json();
  j["model"]["nodes"][2]["params"]["out_features"] = 0;
  CHECK(parse_error(j) ==
        "P.mls: node 'fc1' (/model/nodes/2/params/out_features): must be an integer in [1, "
        "16777216]");

  j = example_json();
  j["model"]["nodes"][2]["params"]["out_features"] = "256";
  CHECK(parse_error(j) ==
        "P.mls: node 'fc1' (/model/nodes/2/params/out_features): must be an integer in [1, "
        "16777216]");

  j = example_json();
  j["model"]["nodes"][2]["params"].erase("out_features");
  CHECK(parse_error(j) ==
        "P.mls: node 'fc1' (/model/nodes/2/params): missing required parameter 'out_features'");

  j = example_json();
  j["model"]["nodes"][2]["params"]["units"] = 3;
  CHECK(parse_error(j) ==
        "P.mls: node 'fc1' (/model/nodes/2/params/units): unknown parameter 'units' "
        "(mls.linear takes 'out_features', 'bias', 'init', 'frozen')");

  j = example_json();
  j["model"]["nodes"][8]["params"]["label_smoothing"] = 1.5;
  CHECK(parse_error(j) ==
        "P.mls: node 'loss' (/model/nodes/8/params/label_smoothing): must be a number in [0, 1)");

  j = example_json();
  j["model"]["nodes"][2]["version"] = 2;
  CHECK(parse_error(j) ==
        "P.mls: /model/nodes/2/version: mls.linear version 2 is newer than this mlstudio "
        "supports (1)");
}

TEST_CASE("link errors name the link and what is missing", "[nodes]") {
  ordered j = example_json();
  j["model"]["links"][3]["to"] = "fc9:in";
  CHECK(parse_error(j) == "P.mls: /model/links/3/to: no node 'fc9'");

  j = example_json();
  j["model"]["links"][3]["from"] = "relu1:output";
  CHECK(parse_error(j) ==
        "P.mls: /model/links/3/from: node 'relu1' (mls.relu) has no output 'output' (it has "
        "'out')");

  j = example_json();
  j["model"]["links"][6]["to"] = "loss:target";
  CHECK(parse_error(j) ==
        "P.mls: /model/links/6/to: node 'loss' (mls.cross_entropy) has no input 'target' (it "
        "has 'logits' and 'labels')");

  j = example_json();
  j["model"]["links"][3]["from"] = "relu1";
  CHECK(parse_error(j) == "P.mls: /model/links/3/from: expected \"node:port\", got \"relu1\"");

  j = example_json();
  j["model"]["links"].push_back({{"from", "fc1:out"}, {"to", "fc2:in"}});
  CHECK(parse_error(j) ==
        "P.mls: /model/links/8: input 'fc2:in' is already linked (by /model/links/3)");

  j = example_json();
  j["model"]["links"][7]["to"] = "fc1:in";
  j["model"]["links"][1]["to"] = "loss:labels";
  CHECK(parse_error(j) ==
        "P.mls: /model/links/1: 'flat:out' gives a tensor but 'loss:labels' "
        "takes labels");
}

TEST_CASE("graph errors: unlinked inputs, cycles, loss count", "[nodes]") {
  ordered j = example_json();
  j["model"]["links"].erase(3);  // relu1 -> fc2
  CHECK(parse_error(j) == "P.mls: node 'fc2' (/model/nodes/4): input 'in' is not linked");

  // fc2 feeds back into fc1, which loses its link from flat.
  j = example_json();
  j["model"]["links"][1]["from"] = "relu1:out";
  CHECK(parse_error(j) == "P.mls: cycle through nodes fc1 -> relu1 -> fc1");

  j = example_json();
  j["model"]["links"][1]["from"] = "fc2:out";
  CHECK(parse_error(j) == "P.mls: cycle through nodes fc1 -> relu1 -> fc2 -> fc1");

  j = example_json();
  j["model"]["nodes"].erase(8);
  j["model"]["links"].erase(7);
  j["model"]["links"].erase(6);
  CHECK(parse_error(j) ==
        "P.mls: /model/nodes: the graph has no loss node (add one: mls.cross_entropy, "
        "mls.nll_loss, mls.mse_loss, mls.l1_loss, mls.huber_loss, mls.bce_with_logits)");

  j = example_json();
  j["model"]["nodes"].push_back({{"id", "loss2"}, {"type", "mls.cross_entropy"}});
  j["model"]["links"].push_back({{"from", "fc3:out"}, {"to", "loss2:logits"}});
  j["model"]["links"].push_back({{"from", "label:out"}, {"to", "loss2:labels"}});
  CHECK(parse_error(j) ==
        "P.mls: /model/nodes/9: a second loss node 'loss2' (the first is "
        "'loss'); a graph has exactly one");
}

TEST_CASE("a draft with graph problems opens and lists them as warnings", "[nodes]") {
  ordered j = example_json();
  j["model"]["links"].erase(3);                  // relu1 -> fc2: fc2 is left unlinked
  j["model"]["links"][0]["from"] = "relu1:out";  // relu1 -> flat closes a cycle
  Result<Document> doc = parse_document(j.dump(), "D.mls", GraphCheck::Draft);
  REQUIRE(doc);
  CHECK(doc->warnings ==
        std::vector<std::string>{"D.mls: node 'fc2' (/model/nodes/4): input 'in' is not linked",
                                 "D.mls: cycle through nodes flat -> fc1 -> relu1 -> flat"});
  CHECK_FALSE(check_graph(*doc, "D.mls"));
  // A draft with a cycle leaves the cycle's nodes out of the order.
  CHECK(topological_order(*doc).size() < doc->nodes.size());
}

TEST_CASE("training and dataset settings are checked", "[nodes]") {
  auto with = [](const char* section, const char* key, ordered value) {
    ordered j = example_json();
    j[section][key] = std::move(value);
    return parse_error(j);
  };
  CHECK(with("training", "epochs", 0) ==
        "P.mls: /training/epochs: must be an integer in [1, 10000000]");
  CHECK(with("training", "batch_size", -4) ==
        "P.mls: /training/batch_size: must be an integer in [1, 16777216]");
  // The command line's limits (--epochs, --batch-size), not only >= 1.
  CHECK(with("training", "batch_size", int64_t{1} << 40) ==
        "P.mls: /training/batch_size: must be an integer in [1, 16777216]");
  CHECK(with("training", "device", "tpu") ==
        "P.mls: /training/device: unknown device 'tpu' (expected 'cpu', 'cuda' or 'vulkan')");
  CHECK(with("training", "mode", "lazy") ==
        "P.mls: /training/mode: unknown mode 'lazy' (expected 'static' or 'eager')");
  CHECK(with("training", "optimizer", {{"type", "lbfgs"}}) ==
        "P.mls: /training/optimizer/type: unknown optimizer 'lbfgs' (expected 'sgd', 'adam', "
        "'adamw', 'rmsprop' or 'adagrad')");
  CHECK(with("training", "schedule", {{"type", "cosine"}, {"gamma", 0.5}}) ==
        "P.mls: /training/schedule/gamma: unknown key 'gamma' for schedule 'cosine' "
        "(expected 'type', 'warmup_steps' or 'eta_min')");
  CHECK(with("training", "early_stopping", {{"patience", 2}, {"monitor", "f2"}}) ==
        "P.mls: /training/early_stopping/monitor: unknown validation metric 'f2' (expected "
        "'loss', 'accuracy', 'macro_f1', 'mae', 'rmse' or 'r2')");
  CHECK(with("training", "clip_grad_norm", -1) ==
        "P.mls: /training/clip_grad_norm: must be a number >= 0");
  CHECK(with("training", "optimizer", {{"type", "sgd"}, {"lr", 0}}) ==
        "P.mls: /training/optimizer/lr: must be a number > 0");
  CHECK(with("training", "optimizer", {{"type", "adam"}, {"momentum", 0.9}}) ==
        "P.mls: /training/optimizer/momentum: unknown key 'momentum' for optimizer 'adam' "
        "(expected 'type', 'lr', 'weight_decay', 'beta1', 'beta2' or 'eps')");
  CHECK(with("training", "optimizer", {{"type", "sgd"}, {"nesterov", true}}) ==
        "P.mls: /training/optimizer/nesterov: Nesterov momentum needs momentum > 0");
  CHECK(with("training", "epoch", 3) ==
        "P.mls: /training/epoch: unknown key 'epoch' (expected 'epochs', 'batch_size', 'seed', "
        "'device', 'mode', 'optimizer', 'schedule', 'clip_grad_norm', 'clip_grad_value', "
        "'early_stopping', 'precision' or 'activation_checkpointing')");
  CHECK(with("dataset", "source", "cifar10") ==
        "P.mls: /dataset/source: unknown dataset source 'cifar10' (expected 'fashion-mnist', "
        "'mnist', 'csv', 'npy', 'npz', 'image-folder', 'synthetic' or 'words')");
  CHECK(with("training", "epochs", 18446744073709551615ull) ==
        "P.mls: /training/epochs: must be an integer in [1, 10000000]");
  CHECK(with("dataset", "limit", -1) == "P.mls: /dataset/limit: must be an integer >= 0");

  ordered j = example_json();
  j["dataset"] = {{"source", "mnist"}};
  CHECK(parse_error(j) == "P.mls: /dataset/path: required for dataset source 'mnist'");
}

TEST_CASE("unknown top-level keys are warned about, not fatal", "[nodes]") {
  ordered j = example_json();
  j["plugins"] = ordered::array();
  Result<Document> doc = parse_document(j.dump(), "P.mls");
  REQUIRE(doc);
  CHECK(doc->warnings == std::vector<std::string>{"P.mls: /plugins: unknown key ignored"});
}

TEST_CASE("a missing file is reported with its path", "[nodes]") {
  Result<Document> doc = load_document("/nonexistent/dir/p.mls");
  REQUIRE_FALSE(doc);
  CHECK(doc.error().message == "/nonexistent/dir/p.mls: file not found");
}

TEST_CASE("a project path that is a FIFO or a device is refused at once, not read", "[nodes]") {
  // A FIFO with no writer would block open(2) forever; /dev/zero never ends.
  const std::string fifo = "/tmp/mls-document-test-" + std::to_string(::getpid()) + ".mls";
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  Result<Document> doc = load_document(fifo);
  ::unlink(fifo.c_str());
  REQUIRE_FALSE(doc);
  CHECK(doc.error().message == fifo + ": is a FIFO, not a regular file");
  Result<Document> zero = load_document("/dev/zero");
  REQUIRE_FALSE(zero);
  CHECK(zero.error().message == "/dev/zero: is a character device, not a regular file");
}

TEST_CASE("Salvage opens what a broken or newer-format file holds and lists the rest",
          "[nodes][document]") {
  auto j = nlohmann::json::parse(R"({
    "format_version": 99,
    "name": "from the future",
    "model": {
      "nodes": [
        {"id": "x", "type": "mls.input", "version": 1, "params": {}},
        {"id": "flat", "type": "mls.flatten", "version": 1, "params": {}},
        {"id": "fc1", "type": "mls.linear", "version": 1, "params": {"out_features": 64, "bias": "yes please"}},
        {"id": "warp", "type": "mls.warp_drive", "version": 1, "params": {}},
        {"id": "fc2", "type": "mls.linear", "version": 1, "params": {"out_features": 10}}
      ],
      "links": [
        {"from": "x:out", "to": "flat:in"},
        {"from": "flat:out", "to": "fc1:in"},
        {"from": "fc1:out", "to": "warp:in"},
        {"from": "warp:out", "to": "fc2:in"}
      ]
    },
    "training": {"epochs": "many"}
  })");
  // Strict and Draft refuse it, naming the first fault.
  auto strict = parse_document(j.dump(), "F.mls", GraphCheck::Draft);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error().message.find("format_version 99 is newer") != std::string::npos);

  auto doc = parse_document(j.dump(), "F.mls", GraphCheck::Salvage);
  REQUIRE(doc.ok());
  CHECK(doc->name == "from the future");
  CHECK(doc->format_version == kFormatVersion);
  std::vector<std::string> ids;
  for (const NodeDoc& n : doc->nodes) ids.push_back(n.id);
  CHECK(ids == std::vector<std::string>{"x", "flat", "fc1", "fc2"});  // the unknown type left out
  CHECK(doc->links.size() == 2);                                      // and both its links
  CHECK(doc->nodes[2].params.at("out_features") == 64);
  CHECK(doc->nodes[2].params.at("bias") == true);  // the bad value took its default
  CHECK(doc->training.epochs == TrainingSpec{}.epochs);
  auto has = [&](const std::string& a, const std::string& b) {
    for (const std::string& w : doc->warnings)
      if (w.find(a) != std::string::npos && w.find(b) != std::string::npos) return true;
    return false;
  };
  CHECK(has("format_version 99", "opened what this version understands"));
  CHECK(has("unknown node type 'mls.warp_drive'", "(node left out)"));
  CHECK(has("/model/links/2", "no node 'warp'"));
  CHECK(has("node 'fc1'", "(default used)"));
  CHECK(has("epochs", "(defaults kept)"));
  // Invalid JSON has nothing to salvage.
  CHECK_FALSE(parse_document("{\"format_version\": 1,", "G.mls", GraphCheck::Salvage).ok());
}
