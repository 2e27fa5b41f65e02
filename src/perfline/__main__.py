from perfline.cli import main

main()
