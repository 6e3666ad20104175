/* One opaque extension a runtime carries and closes when it is disposed,
 * after its namespaces are released: the Lua state that lr_runtime_load_bindings
 * makes. Kept out of the public header: it is the glue's, not an embedder's. */
#ifndef LR_RUNTIME_EXT_H
#define LR_RUNTIME_EXT_H

#include "lunarun.h"

void lr__runtime_set_ext(lr_runtime *rt, void *ext, void (*close_ext)(void *ext));
void *lr__runtime_ext(lr_runtime *rt);

#endif
