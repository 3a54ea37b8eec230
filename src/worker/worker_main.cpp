#include "worker/worker.hpp"

int main(int argc, char** argv) { return d500::worker_main(argc, argv); }
