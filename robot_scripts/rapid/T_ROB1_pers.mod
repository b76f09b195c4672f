MODULE WarpGuardShared
    ! Add to the robot program's task T_ROB1 (the user's program stays as it is otherwise).
    ! The same PERS declarations as in WarpGuard.mod: persistent variables with the same name and type
    ! are one shared value across tasks (CONFIRMED).
    PERS num wg_cycle:=0;
    PERS bool wg_record:=FALSE;

    ! Call at the start of every cycle of the main program, e.g. as the first line of its loop:
    !     WgCycleStart;
    ! A counter, not a flag: a cycle start is never lost even if the background task is busy.
    PROC WgCycleStart()
        wg_cycle:=wg_cycle+1;
    ENDPROC
ENDMODULE
