# cuobjdump and nvdisasm, for the SASS test of the Hopper rungs (tests/test_hopper_sass.cpp) and
# scripts/sass_hopper.sh. Not every CUDA install has them (this repo's CI image does not); the pip
# wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm carry them, under
# <site-packages>/nvidia/<cuXX or cuda_cuobjdump>/bin (.ci/run installs them where cuobjdump is
# missing). Searched: the toolkit's bin, then those wheel folders, then PATH.
# Sets FL_CUOBJDUMP and FL_NVDISASM (cache; "" in the test's defines when not found).
set(FL_SASS_TOOL_HINTS ${CUDAToolkit_BIN_DIR})
find_program(FL_PYTHON3 python3 DOC "python3, to find the pip wheels of cuobjdump/nvdisasm")
if(FL_PYTHON3)
  execute_process(
    COMMAND ${FL_PYTHON3} -c "
import glob, os, site, sys
roots = list(sys.path)
try:
    roots += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
seen = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, 'nvidia', '*', 'bin'))):
        if d not in seen and (os.path.exists(os.path.join(d, 'cuobjdump')) or os.path.exists(os.path.join(d, 'nvdisasm'))):
            seen.append(d)
print('\\n'.join(seen))
"
    OUTPUT_VARIABLE fl_pip_bins OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET TIMEOUT 30)
  if(fl_pip_bins)
    string(REPLACE "\n" ";" fl_pip_bins "${fl_pip_bins}")
    list(APPEND FL_SASS_TOOL_HINTS ${fl_pip_bins})
  endif()
endif()
find_program(FL_CUOBJDUMP cuobjdump HINTS ${FL_SASS_TOOL_HINTS}
  DOC "cuobjdump, for the SASS test of the Hopper rungs")
# nvdisasm beside that cuobjdump first (the two wheels install into one folder), else anywhere.
if(FL_CUOBJDUMP)
  get_filename_component(fl_cuobjdump_dir ${FL_CUOBJDUMP} DIRECTORY)
  find_program(FL_NVDISASM nvdisasm HINTS ${fl_cuobjdump_dir} NO_DEFAULT_PATH
    DOC "nvdisasm, which cuobjdump may call")
endif()
find_program(FL_NVDISASM nvdisasm HINTS ${FL_SASS_TOOL_HINTS} DOC "nvdisasm, which cuobjdump may call")
if(FL_CUOBJDUMP)
  message(STATUS "flash_ladder: cuobjdump ${FL_CUOBJDUMP}, nvdisasm ${FL_NVDISASM}")
else()
  message(STATUS "flash_ladder: cuobjdump not found (python3 -m pip install nvidia-cuda-cuobjdump "
                 "nvidia-cuda-nvdisasm); the SASS test of the Hopper rungs will skip")
endif()
