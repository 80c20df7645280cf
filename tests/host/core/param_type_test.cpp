#include <gtest/gtest.h>

#include "kern/core/manifest.hpp"

using namespace kern;
using namespace kern::core;

TEST(ParamType, ParsesEveryWellFormedKind) {
  struct Case {
    std::string_view text;
    ParamType::Kind kind;
    Direction dir;
    std::uint64_t abi;
  };
  for (const Case& c :
       {Case{"i32", ParamType::Kind::I32, Direction::None, 4}, Case{"i64", ParamType::Kind::I64, Direction::None, 8},
        Case{"f32", ParamType::Kind::F32, Direction::None, 4}, Case{"u8", ParamType::Kind::U8, Direction::None, 1},
        Case{"bytes<1>", ParamType::Kind::Bytes, Direction::None, 1},
        Case{"bytes<128>", ParamType::Kind::Bytes, Direction::None, 128},
        Case{"in state", ParamType::Kind::State, Direction::In, 8},
        Case{"out state", ParamType::Kind::State, Direction::Out, 8},
        Case{"inout state", ParamType::Kind::State, Direction::InOut, 8},
        Case{"in buffer<bf16>", ParamType::Kind::Buffer, Direction::In, 8},
        Case{"out buffer<fp8e8m0>", ParamType::Kind::Buffer, Direction::Out, 8},
        Case{"inout buffer<u64>", ParamType::Kind::Buffer, Direction::InOut, 8}}) {
    auto t = parse_param_type(c.text);
    ASSERT_TRUE(t.has_value()) << c.text;
    EXPECT_EQ(t->kind, c.kind) << c.text;
    EXPECT_EQ(t->dir, c.dir) << c.text;
    EXPECT_EQ(t->abi_size(), c.abi) << c.text;
    EXPECT_EQ(t->to_string(), c.text);  // canonical spelling round-trips
  }
  EXPECT_EQ(parse_param_type("in buffer<fp8e4m3>")->dtype, DType::FP8E4M3);
  EXPECT_EQ(parse_param_type("bytes<256>")->bytes, 256u);
  EXPECT_TRUE(parse_param_type("inout buffer<i8>")->reads());
  EXPECT_TRUE(parse_param_type("inout buffer<i8>")->writes());
  EXPECT_FALSE(parse_param_type("in state")->writes());
  EXPECT_FALSE(parse_param_type("out state")->reads());
  EXPECT_TRUE(parse_param_type("out state")->is_pointer());
  EXPECT_FALSE(parse_param_type("bytes<8>")->is_pointer());
}

TEST(ParamType, RejectsEveryMalformedForm) {
  for (std::string_view bad : {
           "",  // empty
           "I32",
           "int",
           "i16",
           "u32",
           "f16",
           "f64",
           "u64",  // unknown scalars / wrong case
           "in i32",
           "out f32",
           "inout u8",
           "in i64",       // scalars take no direction
           "in bytes<8>",  // bytes<N> takes no direction
           "bytes",
           "bytes<>",
           "bytes<0>",
           "bytes<-1>",
           "bytes<+4>",
           "bytes<08>",
           "bytes<4x>",
           "bytes<0x10>",
           "bytes<1.5>",
           "bytes<18446744073709551616>",  // N must be a decimal u64 >= 1
           "bytes<4",
           "bytes4>",
           "bytes<4>>",
           "bytes<<4>",
           "state",
           "buffer<bf16>",  // state/buffer need a direction
           "in",
           "out",
           "inout",
           "in ",
           "in state ",
           " in state",
           "in  state",
           "in\tstate",
           "IN state",
           "in buffer",
           "in buffer<>",
           "in buffer<bf17>",
           "in buffer<BF16>",
           "in buffer<f64>",
           "in buffer<bool>",
           "in buffer< bf16>",
           "in buffer<bf16 >",
           "in buffer <bf16>",
           "in buffer<bf16>>",
           "in buffer<<bf16>",
           "in buffer<bf16",
           "in bufferbf16",
           "inout  buffer<bf16>",
           "in-out state",
           "inoutstate",
           "in states",
           "out buffer<bf16> ",
           "bytes<8> ",
           " i32",
           "i32 ",
       }) {
    EXPECT_FALSE(parse_param_type(bad).has_value()) << "accepted \"" << bad << "\"";
  }
}
