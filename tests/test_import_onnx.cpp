// Placeholder: tests of the onnx importer (being written).
#include <catch2/catch.hpp>

#include "conv/model.hpp"

TEST_CASE("onnx importer placeholder", "[import]") { REQUIRE(true); }
