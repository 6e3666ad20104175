/* Name rules of SPEC §9. */
#ifndef LR_NAMES_H
#define LR_NAMES_H

#include "util.h"

/* Checks a namespace global or an error class name: an identifier, not a
 * reserved word of ECMAScript or Python, not "console". `what` names the
 * role in the message ("namespace global", "error class name"). */
int lr__name_check_identifier(const char *name, const char *what, char err[LR_ERR_MAX]);

/* Checks a memberNameProperty. */
int lr__name_check_member_property(const char *name, char err[LR_ERR_MAX]);

#endif
