/* Status codes shared by the core and every plugin. A function that can fail returns a
 * ganfw_status; the message that explains it is recorded with host->error() (plugins) or
 * ganfw_error_set() (core) and read back with host->error_message() (plugins, host table
 * ABI 1.1: check GANFW_HOST_HAS first) or ganfw_error_message() (core). The command line
 * turns the final status into the exit code: docs/ABI.md. */
#ifndef GANFW_STATUS_H
#define GANFW_STATUS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stored as int32_t wherever it crosses the ABI. Values never change meaning. */
typedef int32_t ganfw_status;

enum {
  GANFW_OK = 0,
  GANFW_ERR_INVALID_ARG = 1, /* a caller passed something impossible (programmer error) */
  GANFW_ERR_CONFIG = 2,      /* a config file, key or value is wrong */
  GANFW_ERR_PLUGIN = 3,      /* a plugin is missing, of the wrong ABI or kind */
  GANFW_ERR_OOM = 4,         /* the allocator could not satisfy a request */
  GANFW_ERR_IO = 5,          /* a file could not be read or written */
  GANFW_ERR_BACKEND = 6,     /* the device or a library call failed */
  GANFW_ERR_NUMERIC = 7,     /* a NaN or inf where a finite value is required */
  GANFW_ERR_UNSUPPORTED = 8, /* a valid request this build cannot serve */
  GANFW_ERR_INTERRUPTED = 9, /* stopped by the user (Ctrl-C) */
  GANFW_ERR_INTERNAL = 10,   /* a bug in ganfw */
  GANFW_STATUS_COUNT
};

#ifdef __cplusplus
}
#endif
#endif
