# Fails when a generated file kept in the repository (KEPT) differs from what
# ein-tblgen generates now (FRESH); touches STAMP when they agree.
file(READ ${FRESH} fresh)
file(READ ${KEPT} kept)
if(NOT fresh STREQUAL kept)
  message(FATAL_ERROR "${KEPT} is out of date with ir/kern/kern_ops.td: run\n"
                      "  cmake --build <build> --target ein-update-generated\n"
                      "and commit the result (the runtime builds from the kept copy).")
endif()
file(TOUCH ${STAMP})
