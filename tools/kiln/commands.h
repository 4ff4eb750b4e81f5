// The `kiln` tool's commands (main.cpp dispatches): each returns the process's exit code and throws
// kiln::Error for bad options or input.
#pragma once

namespace kiln::cli {

int info(int argc, char** argv);
int train(int argc, char** argv);
int sample(int argc, char** argv);
int tokenize(int argc, char** argv);

}  // namespace kiln::cli
