# The emulated process's system calls (LSTAR points here; entered at CPL 0, rax = the number).
# The kernels' calls make only these, with one CPU and no other thread; anything else stops the
# emulation at ud2, which scripts/emulate_avx512.py reports with the number.
.intel_syntax noprefix
  cmp rax, 202          # futex: libgomp wakes a barrier nobody waits on
  je ret0
  cmp rax, 12           # brk: 0 = failure, so malloc takes its memory from mmap below
  je ret0
  cmp rax, 11           # munmap
  je ret0
  cmp rax, 28           # madvise
  je ret0
  cmp rax, 10           # mprotect
  je ret0
  cmp rax, 204          # sched_getaffinity: CPU 0 only
  je affinity
  cmp rax, 39           # getpid
  je ret1
  cmp rax, 186          # gettid
  je ret1
  cmp rax, 9            # mmap, anonymous without an address: the next pages of a zero-filled
  jne bad               # region the emulator maps (MMAP_VA, MMAP_BYTES there)
  test rdi, rdi
  jne bad
  mov [rip + saved], rsi  # the kernel keeps every register but rax, rcx and r11 (and the
  add rsi, 4095           # caller's stack, whose red zone may be in use)
  and rsi, -4096
  add rsi, [rip + next]
  cmp rsi, [rip + limit]
  ja full
  mov rax, [rip + next]
  mov [rip + next], rsi
  mov rsi, [rip + saved]
  sysretq
full:
  mov rsi, [rip + saved]
  ud2                     # rax still 9: the runner names the call
affinity:
  mov qword ptr [rdx], 1
  mov eax, 8
  sysretq
ret1:
  mov eax, 1
  sysretq
ret0:
  xor eax, eax
  sysretq
bad:
  ud2
.balign 8
next: .quad 0x7e0000000000
saved: .quad 0
limit: .quad 0x7e0000000000 + (1 << 30)
