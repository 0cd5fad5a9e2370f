/* jsonutil.h — small helpers over jansson shared by the core's JSON readers. */
#ifndef LLMRT_CORE_JSONUTIL_H
#define LLMRT_CORE_JSONUTIL_H

#include <jansson.h>

/* "an object", "an array", "a string", "an integer", "a real number", "a boolean", "null":
 * for messages such as "key 'x' is a string, expected an integer". */
const char *llmrt_json_type_name(const json_t *j);

#endif
