/* Name rules of SPEC §9: identifiers the program receives as parameters must
 * be valid in JavaScript and in Python (so one bindings file serves runners
 * in either language), and must not shadow the console. */
#include "names.h"

#include <string.h>

/* ECMAScript reserved words (including strict-mode and future ones, and the
 * literals), then Python's keywords, soft keywords and constants. */
static const char *const lr__reserved[] = {
    "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default",
    "delete", "do", "else", "enum", "export", "extends", "false", "finally", "for",
    "function", "if", "import", "in", "instanceof", "new", "null", "return", "super",
    "switch", "this", "throw", "true", "try", "typeof", "var", "void", "while", "with",
    "yield", "let", "static", "implements", "interface", "package", "private",
    "protected", "public", "arguments", "eval", "undefined", "NaN", "Infinity",
    /* Python */
    "False", "None", "True", "and", "as", "assert", "async", "def", "del", "elif",
    "except", "from", "global", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
    "match", "_", "type",
    NULL};

int lr__name_check_identifier(const char *name, const char *what, char err[LR_ERR_MAX]) {
  if (!name || !*name) return lr__errf(err, "%s must be a non-empty identifier", what);
  for (const char *p = name; *p; p++) {
    char c = *p;
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (p != name && c >= '0' && c <= '9');
    if (!ok)
      return lr__errf(err, "%s \"%s\" must match [A-Za-z_][A-Za-z0-9_]*", what, name);
  }
  for (const char *const *r = lr__reserved; *r; r++)
    if (strcmp(*r, name) == 0)
      return lr__errf(err, "%s \"%s\" is a reserved word of ECMAScript or Python", what, name);
  if (strcmp(name, "console") == 0)
    return lr__errf(err, "%s \"console\" would shadow the program's console", what);
  return 0;
}

int lr__name_check_member_property(const char *name, char err[LR_ERR_MAX]) {
  static const char *const taken[] = {"name", "message", "stack", "args", "with_traceback",
                                      "add_note", NULL};
  if (!name || !*name) return lr__errf(err, "memberNameProperty must be a non-empty string");
  for (const char *const *t = taken; *t; t++)
    if (strcmp(*t, name) == 0)
      return lr__errf(err, "memberNameProperty \"%s\" is taken by the error itself", name);
  size_t n = strlen(name);
  if (n >= 5 && strncmp(name, "__", 2) == 0 && strcmp(name + n - 2, "__") == 0)
    return lr__errf(err, "memberNameProperty \"%s\" must not be of the form __x__", name);
  return 0;
}
