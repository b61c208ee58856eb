// Errors in mtnlg-train.
//
// Anything that touches user input, files or peers reports failure by throwing mtnlg::Error,
// which carries a Code, a message that says what is wrong and how to fix it, and a context
// (a recipe key path, a file name, a rank). Executables catch Error at the top and map the
// code to an exit status. Invariant checks (MTNLG_CHECK*) throw Code::kInternal stamped with
// file:line and, for comparisons, both operands.
//
// Exceptions rather than Status return values: the engine is a library driven by the Trainer
// and by tests, and every failure here is fatal to the run, so unwinding to main (with RAII
// cleaning up temp files and threads) is the simplest correct path.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mtnlg {

// kDiverged: the run itself failed (a non-finite loss or gradient norm): not bad input, exit 1.
enum class Code {
  kInvalidArgument,
  kNotFound,
  kCorruption,
  kIOError,
  kUnsupported,
  kDiverged,
  kInternal
};

const char* code_name(Code code);

// The exit status of every mtnlg executable for an error of this code: 2 bad command line,
// recipe or input; 3 not yet supported by this build; 4 a missing or corrupt file, or I/O;
// 1 a diverged run or an internal error.
int exit_status(Code code);

class Error : public std::runtime_error {
 public:
  Error(Code code, std::string message, std::string context = "")
      : std::runtime_error(format(code, message, context)),
        code_(code),
        message_(std::move(message)),
        context_(std::move(context)) {}

  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& context() const { return context_; }

 private:
  static std::string format(Code code, const std::string& message, const std::string& context);
  Code code_;
  std::string message_;
  std::string context_;
};

// Named constructors, as leveldb::Status has.
inline Error invalid_argument(std::string msg, std::string ctx = "") {
  return Error(Code::kInvalidArgument, std::move(msg), std::move(ctx));
}
inline Error not_found(std::string msg, std::string ctx = "") {
  return Error(Code::kNotFound, std::move(msg), std::move(ctx));
}
inline Error corruption(std::string msg, std::string ctx = "") {
  return Error(Code::kCorruption, std::move(msg), std::move(ctx));
}
inline Error io_error(std::string msg, std::string ctx = "") {
  return Error(Code::kIOError, std::move(msg), std::move(ctx));
}
inline Error unsupported(std::string msg, std::string ctx = "") {
  return Error(Code::kUnsupported, std::move(msg), std::move(ctx));
}

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);

template <typename A, typename B>
[[noreturn]] void check_op_failed(const char* file, int line, const char* expr, const A& a,
                                  const B& b) {
  std::ostringstream os;
  os << expr << " (" << a << " vs " << b << ")";
  check_failed(file, line, os.str());
}
}  // namespace detail

}  // namespace mtnlg

#define MTNLG_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) ::mtnlg::detail::check_failed(__FILE__, __LINE__, "check " #cond); \
  } while (0)

#define MTNLG_CHECK_MSG(cond, msg)                                        \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::ostringstream mtnlg_os_;                                       \
      mtnlg_os_ << "check " #cond ": " << msg;                            \
      ::mtnlg::detail::check_failed(__FILE__, __LINE__, mtnlg_os_.str()); \
    }                                                                     \
  } while (0)

#define MTNLG_CHECK_OP_(a, b, op)                                                                \
  do {                                                                                           \
    const auto& mtnlg_a_ = (a);                                                                  \
    const auto& mtnlg_b_ = (b);                                                                  \
    if (!(mtnlg_a_ op mtnlg_b_))                                                                 \
      ::mtnlg::detail::check_op_failed(__FILE__, __LINE__, "check " #a " " #op " " #b, mtnlg_a_, \
                                       mtnlg_b_);                                                \
  } while (0)

#define MTNLG_CHECK_EQ(a, b) MTNLG_CHECK_OP_(a, b, ==)
#define MTNLG_CHECK_NE(a, b) MTNLG_CHECK_OP_(a, b, !=)
#define MTNLG_CHECK_LT(a, b) MTNLG_CHECK_OP_(a, b, <)
#define MTNLG_CHECK_LE(a, b) MTNLG_CHECK_OP_(a, b, <=)
#define MTNLG_CHECK_GT(a, b) MTNLG_CHECK_OP_(a, b, >)
#define MTNLG_CHECK_GE(a, b) MTNLG_CHECK_OP_(a, b, >=)
