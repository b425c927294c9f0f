#pragma once
/// \file
/// Data-parallel training over MPI (the loom::distributed library, docs/distributed.md): one header
/// for programs that link loom::distributed.
#include "distributed/checkpoint.hpp"
#include "distributed/context.hpp"
#include "distributed/data_parallel.hpp"
#include "distributed/sharding.hpp"
