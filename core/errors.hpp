#pragma once
/// \file
/// One exception hierarchy for the whole library. A UserError is the caller's fault (bad shapes,
/// bad data, a graph that cannot run) and says what, where and how to fix it; an InternalError is
/// ours.
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class UserError : public Error {
public:
    using Error::Error;
};

/// Malformed data in a file: the message names the file and the line.
class DataError : public UserError {
public:
    using UserError::UserError;
};

class InternalError : public Error {
public:
    using Error::Error;
};

}  // namespace loom
