// kern capture's record (include/kern/core/capture.hpp): parse, write back, summarise, and every
// malformed record refused with its line named.
#include "kern/core/capture.hpp"

#include <gtest/gtest.h>

#include <string>

#include "kern/base/error.hpp"

namespace kern::core {
namespace {

const std::string kA(64, 'a'), kB = std::string(63, 'b') + "0";

std::string sample() {
  return "{\"kern_capture\": 1, \"program\": \"python3 peer.py\", \"device\": \"NVIDIA H200\"}\n"
         "{\"kind\": \"module\", \"sha256\": \"" + kA + "\", \"bytes\": 4096, \"format\": \"cubin\"}\n"
         "\n"
         "{\"kind\": \"launch\", \"module\": \"" + kA + "\", \"entry\": \"rms\", \"grid\": [4, 1, 1], \"block\": [256, 1, 1],"
         " \"shared\": 0, \"params\": [[0, 8], [8, 4]], \"ns\": 3000}\r\n"
         "{\"kind\": \"module\", \"sha256\": \"" + kB + "\", \"bytes\": 100, \"format\": \"fatbin\"}\n"
         "{\"kind\": \"module\", \"sha256\": \"" + kA + "\", \"bytes\": 4096, \"format\": \"cubin\"}\n"
         "{\"kind\": \"launch\", \"module\": \"" + kB + "\", \"entry\": \"gemm\", \"grid\": [132, 2, 1], \"block\": [128, 1, 1],"
         " \"shared\": 200000, \"params\": [[0, 8], [16, 8], [24, 128]], \"graph\": 3, \"ns\": 9000, \"runs\": 3}\n"
         "{\"kind\": \"launch\", \"module\": \"" + kA + "\", \"entry\": \"rms\", \"grid\": [4, 1, 1], \"block\": [256, 1, 1],"
         " \"shared\": 0, \"params\": [[0, 8], [8, 4]], \"graph\": 3, \"ns\": 1000, \"runs\": 2}\n"
         "{\"kind\": \"launch\", \"module\": \"" + kB + "\", \"entry\": \"copy\", \"grid\": [1, 1, 1], \"block\": [32, 1, 1],"
         " \"shared\": 0, \"params\": []}";
}

TEST(Capture, ParsesEveryField) {
  const Capture c = parse_capture(sample());
  EXPECT_EQ(c.program, "python3 peer.py");
  EXPECT_EQ(c.device, "NVIDIA H200");
  ASSERT_EQ(c.modules.size(), 2u);  // the second record of kA is the same module
  EXPECT_EQ(c.modules[1].format, "fatbin");
  ASSERT_EQ(c.launches.size(), 4u);
  const CaptureLaunch& g = c.launches[1];
  EXPECT_EQ(g.module, 1u);
  EXPECT_EQ(g.entry, "gemm");
  EXPECT_EQ(g.grid[0], 132u);
  EXPECT_EQ(g.grid[1], 2u);
  EXPECT_EQ(g.shared, 200000u);
  ASSERT_EQ(g.params.size(), 3u);
  EXPECT_EQ(g.params[2].offset, 24u);
  EXPECT_EQ(g.params[2].size, 128u);
  EXPECT_EQ(g.graph, 3u);
  EXPECT_EQ(g.line, 7u);
  EXPECT_EQ(g.runs, 3u);
  EXPECT_EQ(c.launches[0].runs, 1u);  // "ns" alone: one timed execution
  EXPECT_FALSE(c.launches[3].ns.has_value());
  EXPECT_EQ(c.launches[3].runs, 0u);
}

TEST(Capture, WritesWhatItReads) {
  const Capture c = parse_capture(sample());
  const std::string text = write_capture(c);
  const Capture d = parse_capture(text);
  EXPECT_EQ(write_capture(d), text);
  ASSERT_EQ(d.launches.size(), c.launches.size());
  for (size_t i = 0; i < c.launches.size(); ++i) {
    EXPECT_EQ(d.launches[i].entry, c.launches[i].entry);
    EXPECT_EQ(d.modules[d.launches[i].module].sha256, c.modules[c.launches[i].module].sha256);
    EXPECT_EQ(d.launches[i].ns, c.launches[i].ns);
    EXPECT_EQ(d.launches[i].graph, c.launches[i].graph);
    EXPECT_EQ(d.launches[i].runs, c.launches[i].runs);
  }
}

TEST(Capture, SummaryIsByTimeShare) {
  const CaptureSummary s = summarize_capture(parse_capture(sample()));
  EXPECT_EQ(s.modules, 2u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.launches, 4u);
  EXPECT_EQ(s.graph_launches, 2u);
  EXPECT_EQ(s.timed, 3u);
  EXPECT_EQ(s.ns, 13000u);
  ASSERT_EQ(s.kernels.size(), 3u);
  EXPECT_EQ(s.kernels[0].entry, "gemm");
  EXPECT_NEAR(s.kernels[0].share, 9.0 / 13.0, 1e-12);
  EXPECT_EQ(s.kernels[1].entry, "rms");
  EXPECT_EQ(s.kernels[1].launches, 2u);
  EXPECT_EQ(s.kernels[1].ns, 4000u);
  EXPECT_EQ(s.kernels[2].entry, "copy");
  EXPECT_EQ(s.kernels[2].timed, 0u);
  EXPECT_EQ(s.runs, 6u);  // 1 eager + 3 + 2 graph replays
  EXPECT_EQ(s.kernels[1].runs, 3u);
  ASSERT_EQ(s.graphs.size(), 1u);
  EXPECT_EQ(s.graphs[0].id, 3u);
  EXPECT_EQ(s.graphs[0].nodes, 2u);
  EXPECT_EQ(s.graphs[0].replays, 3u);
  EXPECT_EQ(s.graphs[0].ns, 10000u);
  const std::string text = describe(s, 2);
  EXPECT_NE(text.find("2 modules, 3 entries, 4 launches (2 graph kernel nodes), 3 timed over 6 runs: 0.013 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("graph 3: 2 kernel nodes, 3 replays timed, 3.3 us per replay"), std::string::npos) << text;
  EXPECT_NE(text.find("69.2%"), std::string::npos) << text;
  EXPECT_NE(text.find("(1 more)"), std::string::npos) << text;
}

void refused(const std::string& body, const std::string& what, size_t line = 3) {
  const std::string text = "{\"kern_capture\": 1}\n{\"kind\": \"module\", \"sha256\": \"" + kA +
                           "\", \"bytes\": 10, \"format\": \"cubin\"}\n" + body;
  try {
    parse_capture(text);
    ADD_FAILURE() << "accepted: " << body;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::KernelArtifact);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("capture line " + std::to_string(line)), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

std::string launch(const std::string& fields) {
  return "{\"kind\": \"launch\", \"module\": \"" + kA + "\", \"entry\": \"k\", " + fields + "}";
}

TEST(Capture, MalformedRecordsAreRefusedWithTheirLine) {
  const std::string ok = "\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": []";
  refused(launch(ok) + "\n{nope", "not JSON", 4);
  refused("-17e442841", "number overflow");  // found by fuzz_capture: nlohmann's out_of_range, not a parse_error
  refused("[1, 2]", "a record must be a JSON object");
  refused("{\"kind\": \"kernel\"}", "unknown record kind \"kernel\"");
  refused("{\"kind\": \"module\", \"sha256\": \"" + kA + "\", \"bytes\": 11, \"format\": \"cubin\"}", "recorded again");
  refused("{\"kind\": \"module\", \"sha256\": \"ABC\", \"bytes\": 1, \"format\": \"cubin\"}", "64 lowercase hex");
  refused("{\"kind\": \"module\", \"sha256\": \"" + kB + "\", \"bytes\": 0, \"format\": \"cubin\"}", "0 bytes");
  refused("{\"kind\": \"module\", \"sha256\": \"" + kB + "\", \"bytes\": 5, \"format\": \"elf\"}", "unknown module format");
  refused("{\"kind\": \"launch\", \"module\": \"" + kB + "\", \"entry\": \"k\", " + ok + "}", "not recorded before it");
  refused(launch(ok + ", \"extra\": 1"), "unknown key \"extra\"");
  refused(launch("\"grid\": [0, 1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": []"), "\"grid\"[0]");
  refused(launch("\"grid\": [1, 70000, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": []"), "\"grid\"[1]");
  refused(launch("\"grid\": [1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": []"), "[x, y, z]");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [64, 32, 1], \"shared\": 0, \"params\": []"), "1024 threads");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": -1, \"params\": []"), "non-negative");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": [[0, 8], [4, 4]]"),
          "params[1]");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": [[32760, 8]]"), "32764");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": 0, \"params\": [[0, 0]]"), "params[0]");
  refused(launch("\"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"shared\": 0"), "\"params\" must be");
  refused(launch(ok + ", \"ns\": 1.5"), "\"ns\" must be a non-negative integer");
  refused(launch(ok + ", \"runs\": 2"), "\"runs\" without \"ns\"");
  refused(launch(ok + ", \"ns\": 10, \"runs\": 0"), "at least 1");
  refused("{\"kind\": \"launch\", \"module\": \"" + kA + "\", \"entry\": \"\", " + ok + "}", "empty entry");
}

TEST(Capture, TheHeaderComesFirst) {
  EXPECT_THROW(parse_capture(""), Error);
  EXPECT_THROW(parse_capture("\n \n"), Error);
  EXPECT_THROW(parse_capture("{\"kern_capture\": 2}"), Error);
  EXPECT_THROW(parse_capture("{\"kind\": \"module\"}"), Error);
  const Capture c = parse_capture("{\"kern_capture\": 1}");
  EXPECT_TRUE(c.modules.empty());
  EXPECT_EQ(summarize_capture(c).launches, 0u);
}

// The injection library knows each loaded image's symbols and each launch's CUmodule handle:
// which image a handle is follows from the names launched through it.
TEST(Capture, ModulesAreAssignedByTheNamesLaunched) {
  const std::vector<ModuleSymbols> images = {
      {{"a", "b"}},       // 0
      {{"b", "c"}},       // 1
      {{"a", "b", "d"}},  // 2: loaded after 0, holds what 0 holds
      {{"x"}},            // 3
  };
  const std::vector<std::optional<std::size_t>> got =
      assign_modules(images, {{"c"}, {"a", "d"}, {"a"}, {"b", "c"}, {"z"}, {"x", "a"}, {}});
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[0], 1u);             // only 1 holds c
  EXPECT_EQ(got[1], 2u);             // only 2 holds both
  EXPECT_EQ(got[2], 2u);             // 0 and 2 hold a: the one loaded last
  EXPECT_EQ(got[3], 1u);             // b alone would say 2; c decides
  EXPECT_FALSE(got[4].has_value());  // nobody holds z
  EXPECT_EQ(got[5], 3u);             // no image holds both: the last holding the first name
  EXPECT_FALSE(got[6].has_value());  // a handle without names
}

}  // namespace
}  // namespace kern::core
