# cmake -DSO=<npmp.so> -DABI=<major.minor> -P install_user.cmake
# Copies the plugin into the personal plugin folder of whoever runs it.
if(NOT DEFINED ENV{HOME} OR "$ENV{HOME}" STREQUAL "")
  message(FATAL_ERROR "HOME is not set")
endif()
set(_dir "$ENV{HOME}/.local/lib/wireshark/plugins/${ABI}/epan")
file(MAKE_DIRECTORY "${_dir}")
file(COPY "${SO}" DESTINATION "${_dir}")
message(STATUS "Installed ${SO} into ${_dir} (tshark -G plugins | grep npmp; not used by tshark running as root)")
