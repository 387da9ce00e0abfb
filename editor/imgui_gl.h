// Desktop OpenGL prototypes for Dear ImGui's OpenGL 3 backend (force-included into
// imgui_impl_opengl3.cpp with IMGUI_IMPL_OPENGL_LOADER_CUSTOM), in place of the loader that
// Debian's imgui 1.86 ships: its imgui_impl_opengl3_loader.h fills 54 function pointers into a
// 53-slot array, writing one pointer past it when the Instruments tab first shows (found by the
// GUI monkey under ASan/UBSan). The functions come from libOpenGL (GLVND), which the editor
// links through Qt6::OpenGL.
#pragma once

#define GL_GLEXT_PROTOTYPES 1
#include <GL/glcorearb.h>
