# ELASTIC_ENABLE_WARNINGS: warning flags, and --enable-werror
AC_DEFUN([ELASTIC_ENABLE_WARNINGS], [
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])],
    [], [enable_werror=no])
  WARNING_CFLAGS="-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers"
  AS_IF([test "x$enable_werror" = xyes], [WARNING_CFLAGS="$WARNING_CFLAGS -Werror"])
  AC_SUBST([WARNING_CFLAGS])
])
