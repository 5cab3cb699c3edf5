/* l3cache_cli: runs the `l3fs cache ...` command implementation on its own,
 * for the CLI tests (the l3fs binary dispatches to the same function). */
#include "l3cache.h"

int main(int argc, char **argv)
{
    return l3cache_cli_main(argc, argv);
}
