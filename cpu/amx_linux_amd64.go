package cpu

import (
	"fmt"
	"syscall"
	"unsafe"
)

// arch_prctl codes and the XSAVE feature number for AMX tile data
// (arch/x86/include/uapi/asm/prctl.h); x/sys/unix lacks them.
const (
	archGetXCompPerm  = 0x1022
	archReqXCompPerm  = 0x1023
	xfeatureXTileData = 18
)

// archRequestAMX asks the kernel for permission to use AMX tile data and
// verifies it with ARCH_GET_XCOMP_PERM.
func archRequestAMX() AMXPermission {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0); errno != 0 {
		return AMXPermission{AMXRefused, "arch_prctl(ARCH_REQ_XCOMP_PERM): " + errno.Error()}
	}
	var mask uint64
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXCompPerm, uintptr(unsafe.Pointer(&mask)), 0); errno != 0 {
		return AMXPermission{AMXRefused, "arch_prctl(ARCH_GET_XCOMP_PERM): " + errno.Error()}
	}
	if mask&(1<<xfeatureXTileData) == 0 {
		return AMXPermission{AMXRefused, fmt.Sprintf("arch_prctl(ARCH_GET_XCOMP_PERM): mask %#x lacks XTILEDATA", mask)}
	}
	return AMXPermission{State: AMXGranted}
}
