/* The warm pool: placeholder (no pool yet). */
#include "runtime.h"

lr_sandbox *lr__pool_take(lr_runtime *rt, const lr_config *cfg) { return NULL; }
void lr__pool_sandbox_gone(lr_runtime *rt) {}
void lr__pool_close(lr_runtime *rt) {}
