// mtnlg-train: trains a GPT model from a recipe (cmd/train_command.h; --help lists the options
// and the exit statuses).
#include "cmd/train_command.h"

int main(int argc, char** argv) {
  return mtnlg::run_train_command(argc, argv);
}
