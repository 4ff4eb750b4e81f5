# The layer targets' boundaries hold (cmake/kiln_layers.cmake): with a lower layer's include path an
# upward #include does not compile, and a lower layer's code that calls a higher layer does not link
# against the layers below it. Each failure is paired with a control that passes with the same flags.
# Usage: cmake -DCXX=<compiler> -DWORK=<dir> -DRUNTIME_INCLUDES=<a|b> -DENGINE_INCLUDES=<a|b>
#        [-DRUNTIME_LIB=<libkiln_runtime_linked.so> -DENGINE_LIB=<libkiln_engine_linked.so>] -P upward.cmake
file(MAKE_DIRECTORY ${WORK})

# compiles `code` with the include dirs `incs` ("|"-separated); `want` is PASS or FAIL; on FAIL the
# compiler's message must match `match` (the missing header or symbol, not some other error)
function(probe what code incs want match)
  string(REPLACE "|" ";" incs "${incs}")
  set(flags -std=c++20)
  foreach(i ${incs})
    list(APPEND flags -I${i})
  endforeach()
  file(WRITE ${WORK}/probe.cpp "${code}\n")
  execute_process(COMMAND ${CXX} ${flags} ${WORK}/probe.cpp ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err
                  OUTPUT_VARIABLE out)
  if(want STREQUAL "PASS" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: should build, but:\n${out}${err}")
  elseif(want STREQUAL "FAIL" AND rc EQUAL 0)
    message(FATAL_ERROR "${what}: built, but it must not")
  elseif(want STREQUAL "FAIL" AND NOT "${out}${err}" MATCHES "${match}")
    message(FATAL_ERROR "${what}: failed for another reason than '${match}':\n${out}${err}")
  endif()
  message(STATUS "${what}: ${want} as it should")
endfunction()

probe("runtime includes runtime/backend.h" "#include \"runtime/backend.h\"" "${RUNTIME_INCLUDES}" PASS "" -fsyntax-only)
probe("runtime includes engine/realize.h" "#include \"engine/realize.h\"" "${RUNTIME_INCLUDES}" FAIL
      "engine/realize.h" -fsyntax-only)
probe("runtime includes runtime/cpu/compiler.h" "#include \"runtime/cpu/compiler.h\"" "${RUNTIME_INCLUDES}" FAIL
      "runtime/cpu/compiler.h" -fsyntax-only)
probe("engine includes kiln/device.h" "#include \"kiln/device.h\"" "${ENGINE_INCLUDES}" PASS "" -fsyntax-only)
probe("engine includes kiln/tensor.h" "#include \"kiln/tensor.h\"" "${ENGINE_INCLUDES}" FAIL "kiln/tensor.h"
      -fsyntax-only)

if(RUNTIME_LIB)
  set(call "namespace kiln::engine { bool realizing(); }\nbool probe() { return kiln::engine::realizing(); }")
  probe("engine's realizing() linked with the engine" "${call}" "" PASS "" -shared -fPIC -Wl,--no-undefined
        -o ${WORK}/probe.so ${ENGINE_LIB})
  probe("a call of engine's realizing() linked with the runtime" "${call}" "" FAIL
        "undefined reference to .kiln::engine::realizing" -shared -fPIC -Wl,--no-undefined -o ${WORK}/probe.so
        ${RUNTIME_LIB})
endif()
