#include "fetch_redirect.h"
