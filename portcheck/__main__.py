from portcheck.cli import main

main()
