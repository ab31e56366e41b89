// Private to src/cpu/: the hardware detection of one architecture (cpu_detect_x86.c, cpu_detect_arm.c; the
// scalar fallback for any other in cpu_features.c). cpu_features.c calls it once and applies TACHYON_ISA.
#ifndef TACHYON_CPU_DETECT_H
#define TACHYON_CPU_DETECT_H

#include "cpu/cpu.h"

// Fills *f with what the CPU and OS support and returns the highest level whose kernels can run.
cpu_isa cpu_detect_hw(cpu_features *f);

#endif
