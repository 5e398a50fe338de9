# R CMD INSTALL of the package PACKAGE into the library directory LIBRARY with the R program
# R, quiet unless it fails:  cmake -DR=... -DLIBRARY=... -DPACKAGE=... -P r-install.cmake
file(MAKE_DIRECTORY ${LIBRARY})
execute_process(COMMAND ${R} CMD INSTALL --no-multiarch --library=${LIBRARY} ${PACKAGE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "R CMD INSTALL ${PACKAGE} failed:\n${out}")
endif()
