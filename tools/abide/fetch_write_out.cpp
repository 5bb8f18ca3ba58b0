#include "fetch_write_out.h"
