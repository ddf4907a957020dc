// Placeholder: tests of the caffe importer (being written).
#include <catch2/catch.hpp>

#include "conv/model.hpp"

TEST_CASE("caffe importer placeholder", "[import]") { REQUIRE(true); }
