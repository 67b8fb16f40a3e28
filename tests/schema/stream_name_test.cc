// Stream names (cuflight/schema/log_layout.h): the longer form that carries the instance id and
// the owner, and the parse every reader uses to tell streams apart.
#include <gtest/gtest.h>

#include "cuflight/schema/log_layout.h"

namespace cuflight::schema {
namespace {

TEST(StreamNameTest, TheLongerFormCarriesInstanceAndOwner) {
  EXPECT_EQ(StreamBaseName("node7", "/usr/bin/python3.11", 1, 1'760'000'000'010'000'000,
                           18446744073709551615u, "u1000"),
            "node7-python3.11-1-1760000000010000000-18446744073709551615-u1000");
  // The owner is sanitised like host and exe.
  EXPECT_EQ(StreamBaseName("h", "e", 2, 3, 4, "t/../x"), "h-e-2-3-4-t_.._x");
  // The shorter form is unchanged.
  EXPECT_EQ(StreamBaseName("h", "e", 2, 3), "h-e-2-3");
}

TEST(StreamNameTest, BothFormsParse) {
  StreamNameParts p;
  ASSERT_TRUE(ParseStreamBaseName("node-7-py-3.11-42-1760000000010000000-99-tcp", &p));
  EXPECT_EQ(p.pid, 42);
  EXPECT_EQ(p.start_ns, 1760000000010000000);
  EXPECT_EQ(p.instance_id, 99u);
  EXPECT_EQ(p.owner, "tcp");
  ASSERT_TRUE(ParseStreamBaseName("h-e-1-5-18446744073709551615-t0123456789abcdef", &p));
  EXPECT_EQ(p.instance_id, 18446744073709551615u);
  EXPECT_EQ(p.owner, "t0123456789abcdef");
  // The shorter form (producers without an instance id): no instance, no owner.
  ASSERT_TRUE(ParseStreamBaseName("a.b-py3.11-7-99", &p));
  EXPECT_EQ(p.pid, 7);
  EXPECT_EQ(p.start_ns, 99);
  EXPECT_EQ(p.instance_id, 0u);
  EXPECT_EQ(p.owner, "");
  for (const char* bad : {"notes", "h-e-x-5", "h-e-1-5-x-u0", "1-5-9-u0", "h-e-1-5--u0"}) {
    EXPECT_FALSE(ParseStreamBaseName(bad, &p)) << bad;
  }
}

}  // namespace
}  // namespace cuflight::schema
