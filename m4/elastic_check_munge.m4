# ELASTIC_CHECK_MUNGE: --with-munge[=DIR], libmunge for the mesh under Slurm
#
# Under Slurm the elastic-exec mesh (src/exec/mesh/) can authenticate each
# connection with a munge credential (munged's uid proof, TTL and replay
# cache) instead of a shared per-job secret.  Without libmunge that mode
# is not built (mesh_auth_munge_probe says so) and its tests skip.
AC_DEFUN([ELASTIC_CHECK_MUNGE], [
  ELASTIC_CHECK_LIB([munge], [munge], [munge.h], [munge_decode], [-lmunge],
                    [libmunge-dev], [libmunge (mesh authentication under Slurm)])
])
