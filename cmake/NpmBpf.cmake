# BPF programs in restricted C, compiled by clang and turned into libbpf skeletons by bpftool at
# build time: the congestion controls of src/cc and the SCTP INIT filter of src/sctp. Each is
# optional: built only when clang, bpftool and libbpf (headers and library) are present.

# npm_bpf_toolchain(<missing>): finds clang, bpftool and libbpf (cache variables NPM_CLANG,
#   NPM_BPFTOOL, NPM_LIBBPF_INCLUDE_DIR, NPM_LIBBPF_LIBRARY; NPM_BPF_ARCH is the
#   __TARGET_ARCH_ value, NPM_BPF_UAPI_OPTIONS the options of programs built without vmlinux.h).
#   <missing> is empty when all of them are there, else names those
#   that are not.
function(npm_bpf_toolchain missing)
  find_program(NPM_CLANG NAMES clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14)
  find_program(NPM_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin /usr/local/sbin)
  find_path(NPM_LIBBPF_INCLUDE_DIR NAMES bpf/libbpf.h)
  find_library(NPM_LIBBPF_LIBRARY NAMES bpf)
  set(absent "")
  foreach(v NPM_CLANG NPM_BPFTOOL NPM_LIBBPF_INCLUDE_DIR NPM_LIBBPF_LIBRARY)
    if(NOT ${v})
      list(APPEND absent ${v})
    endif()
  endforeach()
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|i.86")
    set(arch x86)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(arch arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "ppc64")
    set(arch powerpc)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "s390")
    set(arch s390)
  else()
    set(arch ${CMAKE_SYSTEM_PROCESSOR})
  endif()
  set(NPM_BPF_ARCH ${arch} CACHE INTERNAL "__TARGET_ARCH_ value for BPF objects")
  # A program that includes the UAPI headers (linux/bpf.h) instead of vmlinux.h needs the
  # architecture's asm/ headers, which Debian keeps under the multiarch directory.
  set(uapi "")
  if(CMAKE_LIBRARY_ARCHITECTURE)
    set(uapi -idirafter /usr/include/${CMAKE_LIBRARY_ARCHITECTURE})
  endif()
  set(NPM_BPF_UAPI_OPTIONS "${uapi}" CACHE INTERNAL "clang options of BPF programs that include linux/bpf.h")
  set(${missing} "${absent}" PARENT_SCOPE)
endfunction()

# npm_bpf_object(<object> SOURCE <file.bpf.c> [INCLUDES <dir>...] [OPTIONS <flag>...]
#                [DEPENDS <file or target>...])
#   Compiles SOURCE with clang -target bpf into <object> (a path). INCLUDES are searched before
#   libbpf's headers; DEPENDS are generated headers (vmlinux.h) and their targets.
function(npm_bpf_object object)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SOURCE" "INCLUDES;OPTIONS;DEPENDS")
  list(TRANSFORM arg_INCLUDES PREPEND "-I")
  get_filename_component(name ${object} NAME)
  add_custom_command(OUTPUT ${object}
    COMMAND ${NPM_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${NPM_BPF_ARCH} -Wall ${arg_OPTIONS}
            ${arg_INCLUDES} -idirafter ${NPM_LIBBPF_INCLUDE_DIR} -c ${arg_SOURCE} -o ${object}
    DEPENDS ${arg_SOURCE} ${arg_DEPENDS}
    COMMENT "Compiling the BPF object ${name}"
    VERBATIM)
endfunction()

# npm_bpf_skeleton(<name> SOURCE <file.bpf.c> [INCLUDES ...] [OPTIONS ...] [DEPENDS ...])
#   Compiles SOURCE (npm_bpf_object) into ${CMAKE_CURRENT_BINARY_DIR}/<name>.bpf.o and generates
#   its libbpf skeleton ${CMAKE_CURRENT_BINARY_DIR}/skeleton/<name>.skel.h (struct <name>_bpf,
#   <name>_bpf__open(), ...). Target <name>_bpf builds both: add_dependencies() on it from what
#   includes the skeleton, whose directory is <name>_SKELETON_DIR and object <name>_OBJECT (set in
#   the caller's scope).
function(npm_bpf_skeleton name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SOURCE" "INCLUDES;OPTIONS;DEPENDS")
  set(object ${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.o)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/skeleton)
  set(skeleton ${dir}/${name}.skel.h)
  npm_bpf_object(${object} SOURCE ${arg_SOURCE} INCLUDES ${arg_INCLUDES} OPTIONS ${arg_OPTIONS}
                 DEPENDS ${arg_DEPENDS})
  add_custom_command(OUTPUT ${skeleton}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${NPM_BPFTOOL} gen skeleton ${object} name ${name}_bpf > ${skeleton}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skeleton}.tmp ${skeleton}
    DEPENDS ${object}
    COMMENT "Generating the libbpf skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_bpf DEPENDS ${object} ${skeleton})
  set(${name}_SKELETON_DIR ${dir} PARENT_SCOPE)
  set(${name}_OBJECT ${object} PARENT_SCOPE)
endfunction()
