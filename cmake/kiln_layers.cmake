# kiln's layers as library targets (docs/architecture.md, "Layers"), lowest first. Each layer is an
# object library that sees, through its include path, only its own folder and the layers below it:
# the path is a view (<build>/layers/<name>/) of symbolic links to the allowed folders of src/ and
# the allowed public headers, so an upward #include fails to compile. Each layer is also linked as a
# shared library against the layers below it with --no-undefined (<build>/layers/lib/), so an upward
# call fails to link. libkiln.a (kiln::kiln) holds every layer's objects.

option(KILN_CHECK_LAYERS "Link each layer alone to check it calls no layer above it" ${PROJECT_IS_TOP_LEVEL})
set(KILN_LAYERS_DIR ${PROJECT_BINARY_DIR}/layers)
# public headers by layer (include/kiln/...): what the base, frontend and tile layers may include;
# the library layers see them all. A new public header goes in one of these lists.
set(KILN_HEADERS_BASE dtype.h error.h debug.h device.h)
set(KILN_HEADERS_FRONTEND ${KILN_HEADERS_BASE} tensor.h functional.h autocast.h jit.h)
set(KILN_HEADERS_TILE ${KILN_HEADERS_FRONTEND} tile.h tile_ops.h tile)

# kiln_layer(<name> SOURCES <folders of src/> SEES <folders of src/> HEADERS <public headers> BELOW <layers>)
# SOURCES: the layer's own folders ("runtime/*": the files of src/runtime without its subfolders).
# SEES: the folders its include path shows besides its own, in the same notation.
# HEADERS: include/kiln entries it may include, or ALL. BELOW: the layers it links (their views too).
function(kiln_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES;HEADERS;BELOW;EXTRA_SOURCES" ${ARGN})
  set(view ${KILN_LAYERS_DIR}/${name})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view}/src)
  set(sources ${L_EXTRA_SOURCES})
  foreach(entry ${L_SOURCES} ${L_SEES})
    if(entry MATCHES "^(.*)/\\*$")  # the folder's files only
      set(dir ${CMAKE_MATCH_1})
      file(GLOB files LIST_DIRECTORIES false CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*)
      file(MAKE_DIRECTORY ${view}/src/${dir})
      foreach(f ${files})
        get_filename_component(base ${f} NAME)
        file(CREATE_LINK ${f} ${view}/src/${dir}/${base} SYMBOLIC)
      endforeach()
      set(glob ${PROJECT_SOURCE_DIR}/src/${dir}/*.cpp)
    else()
      get_filename_component(parent ${view}/src/${entry} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${entry} ${view}/src/${entry} SYMBOLIC)
      set(glob ${PROJECT_SOURCE_DIR}/src/${entry}/*.cpp)
    endif()
    if(entry IN_LIST L_SOURCES)
      if(entry MATCHES "/\\*$")
        file(GLOB own CONFIGURE_DEPENDS ${glob})
      else()
        file(GLOB_RECURSE own CONFIGURE_DEPENDS ${glob})
      endif()
      list(APPEND sources ${own})
    endif()
  endforeach()
  if(L_HEADERS STREQUAL "ALL")
    set(public ${PROJECT_SOURCE_DIR}/include)
  else()
    set(public ${view}/include)
    file(MAKE_DIRECTORY ${public}/kiln)
    foreach(h ${L_HEADERS})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/kiln/${h} ${public}/kiln/${h} SYMBOLIC)
    endforeach()
  endif()

  add_library(kiln_${name} OBJECT ${sources})
  target_include_directories(kiln_${name} PRIVATE ${view}/src ${public})
  target_link_libraries(kiln_${name} PUBLIC Threads::Threads)
  set_target_properties(kiln_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  kiln_warnings(kiln_${name})
  set_property(GLOBAL APPEND PROPERTY KILN_LAYER_OBJECTS $<TARGET_OBJECTS:kiln_${name}>)

  # the link check: this layer's objects with only the layers below it
  # (sanitizer runtimes are linked into programs, not shared libraries: no check under KILN_SANITIZE)
  if(KILN_CHECK_LAYERS AND NOT KILN_SANITIZE)
    add_library(kiln_${name}_linked SHARED $<TARGET_OBJECTS:kiln_${name}>)
    set(below)
    foreach(b ${L_BELOW})
      list(APPEND below kiln_${b}_linked)
    endforeach()
    target_link_libraries(kiln_${name}_linked PRIVATE ${below} Threads::Threads ${CMAKE_DL_LIBS})
    target_link_options(kiln_${name}_linked PRIVATE "LINKER:--no-undefined")
    set_target_properties(kiln_${name}_linked PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${KILN_LAYERS_DIR}/lib)
  endif()
endfunction()
