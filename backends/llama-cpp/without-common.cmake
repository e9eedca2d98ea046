# Included right after llama.cpp's own project() call (scripts/setup.sh passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python forces LLAMA_BUILD_COMMON on in its cache,
# which builds llama.cpp's command-line helper library (llama-common) and cpp-httplib: about a
# third of the build, and nothing in the Python package loads them (it opens libllama, libggml*
# and, when built, libmtmd through ctypes). A normal variable set here, in llama.cpp's directory
# scope, hides that cache entry from llama.cpp's option() and if() (policy CMP0077, NEW from its
# cmake_minimum_required 3.14), so neither is configured, built or installed.
set(LLAMA_BUILD_COMMON OFF)
